package io.github.orderflow.interop;

import java.util.HashMap;
import java.util.Map;

/** Command-line flags of the form --name value. */
final class Args {
    private final Map<String, String> values = new HashMap<>();

    Args(String[] args) {
        for (int i = 0; i < args.length; i++) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("want --name value pairs, got " + args[i]);
            }
            values.put(args[i].substring(2), args[++i]);
        }
    }

    String get(String name) {
        String v = values.get(name);
        if (v == null || v.isEmpty()) {
            throw new IllegalArgumentException("--" + name + " is required");
        }
        return v;
    }

    String get(String name, String def) {
        String v = values.get(name);
        return v == null || v.isEmpty() ? def : v;
    }
}
