package io.github.orderflow.interop;

import java.time.Duration;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.ProducerBuilder;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;

/**
 * Publishes JSON lines (see {@link Line}) with the RocketMQ 5 gRPC client
 * (org.apache.rocketmq:rocketmq-client-java) through a RocketMQ proxy, and
 * prints a {@link Summary}.
 *
 * <pre>
 * GrpcPublish --endpoint 127.0.0.1:8081 --mode MODE --in FILE|- [--check-wait-seconds 120]
 * </pre>
 *
 * Modes: normal (normal messages), fifo (each line's group is its message
 * group: the order ID), tx (one transaction per line; its tx says commit,
 * unknown, resolved COMMIT on the check-back, or rollback). Every mode
 * honours keys, tag and user properties. A failed send fails the run (exit
 * status 1) with the client's error, such as a topic that does not accept
 * the message type. In tx mode the program waits, up to
 * --check-wait-seconds, until every transaction left unknown was checked
 * back; the summary says how many were.
 */
public final class GrpcPublish {
    /** The user property naming a transactional message's line, for check-backs. */
    private static final String LINE_PROPERTY = "interop_line";

    private GrpcPublish() {
    }

    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        String mode = args.get("mode");
        if (!mode.equals("normal") && !mode.equals("fifo") && !mode.equals("tx")) {
            throw new IllegalArgumentException("unknown mode " + mode);
        }
        List<Line> lines = Line.read(args.get("in", "-"));
        Summary s = new Summary("grpc", mode, lines.size());
        CheckBacks checked = new CheckBacks();

        ClientServiceProvider provider = ClientServiceProvider.loadService();
        ClientConfiguration config = ClientConfiguration.newBuilder()
            .setEndpoints(args.get("endpoint"))
            .enableSsl(false)
            // Generous: the suite shares a small machine with the broker,
            // the proxy and other tests; a slow answer is not what it tests.
            .setRequestTimeout(Duration.ofSeconds(30))
            .build();
        Set<String> topics = new LinkedHashSet<>();
        for (Line l : lines) {
            topics.add(l.topic);
        }
        ProducerBuilder b = provider.newProducerBuilder()
            .setClientConfiguration(config)
            .setTopics(topics.toArray(new String[0]))
            .setMaxAttempts(3);
        if (mode.equals("tx")) {
            b.setTransactionChecker(view -> {
                int i = Integer.parseInt(view.getProperties().get(LINE_PROPERTY));
                String tx = lines.get(i).tx;
                if ("unknown".equals(tx)) {
                    checked.add(i);
                    return TransactionResolution.COMMIT;
                }
                return "commit".equals(tx) ? TransactionResolution.COMMIT : TransactionResolution.ROLLBACK;
            });
        }
        try (Producer p = b.build()) {
            for (int i = 0; i < lines.size(); i++) {
                Line l = lines.get(i);
                MessageBuilder mb = message(provider, l);
                if (mode.equals("fifo")) {
                    if (l.group == null || l.group.isEmpty()) {
                        throw new IllegalArgumentException("line " + (i + 1) + ": fifo mode needs a group");
                    }
                    mb.setMessageGroup(l.group);
                }
                if (!mode.equals("tx")) {
                    SendReceipt r = p.send(mb.build());
                    s.messageIds.add(r.getMessageId().toString());
                    s.sent++;
                    continue;
                }
                mb.addProperty(LINE_PROPERTY, Integer.toString(i));
                Transaction tx = p.beginTransaction();
                SendReceipt r = p.send(mb.build(), tx);
                s.messageIds.add(r.getMessageId().toString());
                s.sent++;
                switch (l.tx == null ? "" : l.tx) {
                    case "commit":
                        tx.commit();
                        s.committed++;
                        break;
                    case "unknown":
                        s.unknown++;
                        break;
                    case "rollback":
                        tx.rollback();
                        s.rolledBack++;
                        break;
                    default:
                        throw new IllegalArgumentException("line " + (i + 1) + ": tx " + l.tx + ": want commit, unknown or rollback");
                }
            }
            if (mode.equals("tx")) {
                checked.await(s.unknown, Long.parseLong(args.get("check-wait-seconds", "120")));
                s.checkedBack = checked.count();
                if (s.checkedBack > 0) {
                    // Let the resolution of the last check-back reach the proxy.
                    TimeUnit.SECONDS.sleep(2);
                }
            }
        }
        s.print();
        System.exit(0);
    }

    private static MessageBuilder message(ClientServiceProvider provider, Line l) {
        MessageBuilder mb = provider.newMessageBuilder().setTopic(l.topic).setBody(l.bodyBytes());
        if (l.hasTag()) {
            mb.setTag(l.tag);
        }
        if (!l.keyList().isEmpty()) {
            mb.setKeys(l.keyList().toArray(new String[0]));
        }
        for (Map.Entry<String, String> e : l.propertyMap().entrySet()) {
            mb.addProperty(e.getKey(), e.getValue());
        }
        return mb;
    }
}
