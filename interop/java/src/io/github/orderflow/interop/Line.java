package io.github.orderflow.interop;

import com.google.gson.Gson;
import com.google.gson.JsonParseException;
import com.google.gson.annotations.SerializedName;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.List;
import java.util.Map;

/**
 * One message to publish: a line of the input, a JSON object. topic, keys,
 * tag and body (base64) make the message; the other fields are options some
 * modes read.
 */
final class Line {
    String topic;
    List<String> keys;
    String tag;
    /** The body, base64: bodies are bytes, not always valid UTF-8. */
    String body;
    /** User properties. */
    Map<String, String> properties;
    /** Transactional modes: commit, unknown (commit on check-back) or rollback. */
    String tx;
    /** FIFO mode of the gRPC client: the message group. */
    String group;
    /** Batch mode: consecutive lines with the same number go in one batch. */
    Integer batch;
    /** Selector mode: the argument the queue selector hashes (the order ID). */
    String shard;
    /**
     * Retries mode: the index of an earlier line whose message this one
     * sends again with the same message ID, as a producer's retry does.
     */
    @SerializedName("retry_of")
    Integer retryOf;

    byte[] bodyBytes() {
        return Base64.getDecoder().decode(body);
    }

    List<String> keyList() {
        return keys == null ? Collections.emptyList() : keys;
    }

    Map<String, String> propertyMap() {
        return properties == null ? Collections.emptyMap() : properties;
    }

    boolean hasTag() {
        return tag != null && !tag.isEmpty();
    }

    /** Reads the lines of path, or of standard input when path is "-". */
    static List<Line> read(String path) throws IOException {
        Reader r = "-".equals(path)
            ? new InputStreamReader(System.in, StandardCharsets.UTF_8)
            : Files.newBufferedReader(Paths.get(path), StandardCharsets.UTF_8);
        Gson gson = new Gson();
        List<Line> out = new ArrayList<>();
        try (BufferedReader br = new BufferedReader(r)) {
            String s;
            int n = 0;
            while ((s = br.readLine()) != null) {
                n++;
                if (s.trim().isEmpty()) {
                    continue;
                }
                Line l;
                try {
                    l = gson.fromJson(s, Line.class);
                } catch (JsonParseException e) {
                    throw new IOException("line " + n + ": " + e.getMessage(), e);
                }
                if (l.topic == null || l.topic.isEmpty() || l.body == null) {
                    throw new IOException("line " + n + ": topic and body are required");
                }
                if (l.retryOf != null && (l.retryOf < 0 || l.retryOf >= out.size())) {
                    throw new IOException("line " + n + ": retry_of " + l.retryOf + " names no earlier line");
                }
                out.add(l);
            }
        }
        return out;
    }
}
