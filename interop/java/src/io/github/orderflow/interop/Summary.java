package io.github.orderflow.interop;

import com.google.gson.GsonBuilder;
import com.google.gson.annotations.SerializedName;
import java.util.ArrayList;
import java.util.List;

/** What a publishing run did, printed as one JSON line on standard output. */
final class Summary {
    String client;
    String mode;
    int lines;
    /** Messages the broker stored: sends acknowledged SEND_OK, batches counted by message. */
    int sent;
    /** Sends of a batch mode (one per batch). */
    int batches;
    /** Transactional modes: committed at once, left unknown, rolled back. */
    int committed;
    int unknown;
    @SerializedName("rolled_back")
    int rolledBack;
    /** Check-backs answered for messages left unknown. */
    @SerializedName("checked_back")
    int checkedBack;
    /** Lines sent again with the message ID of an earlier one. */
    int retries;
    @SerializedName("message_ids")
    List<String> messageIds = new ArrayList<>();

    Summary(String client, String mode, int lines) {
        this.client = client;
        this.mode = mode;
        this.lines = lines;
    }

    void print() {
        System.out.println(new GsonBuilder().disableHtmlEscaping().create().toJson(this));
        System.out.flush();
    }
}
