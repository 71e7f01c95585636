package io.github.orderflow.interop;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.MessageQueueSelector;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.compression.CompressionType;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Publishes JSON lines (see {@link Line}) with the RocketMQ Java remoting
 * client (org.apache.rocketmq:rocketmq-client), the way an upstream order
 * service on that client does, and prints a {@link Summary}.
 *
 * <pre>
 * RemotingPublish --namesrv 127.0.0.1:9876 --group G --mode MODE --in FILE|- [--check-wait-seconds 120]
 * </pre>
 *
 * Modes: default (the producer as it comes: bodies of 4 KiB or more go out
 * zlib-compressed), zstd and lz4 (setCompressType), batch (consecutive lines
 * of one batch number in one send), selector (a MessageQueueSelector on the
 * line's shard, the order ID), retries (more retries, and a line with
 * retry_of is sent again with the message ID of that earlier line, as the
 * client's own retry of a send whose answer was lost does), tx
 * (transactional: each line's tx says commit, unknown, answered COMMIT on the
 * broker's check-back, or rollback). Every mode honours keys, tag and user
 * properties. A send that is not SEND_OK fails the run (exit status 1). In
 * tx mode the program waits, up to --check-wait-seconds, until every
 * transaction left unknown was checked back; the summary says how many were.
 */
public final class RemotingPublish {
    /** The user property naming a transactional message's line, for check-backs. */
    private static final String LINE_PROPERTY = "interop_line";

    private RemotingPublish() {
    }

    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        String mode = args.get("mode");
        List<Line> lines = Line.read(args.get("in", "-"));
        Summary s = new Summary("remoting", mode, lines.size());
        if ("tx".equals(mode)) {
            publishTransactional(args, lines, s);
        } else {
            publish(args, mode, lines, s);
        }
        s.print();
        System.exit(0);
    }

    private static void publish(Args args, String mode, List<Line> lines, Summary s) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer(args.get("group"));
        p.setNamesrvAddr(args.get("namesrv"));
        timeouts(p);
        switch (mode) {
            case "default":
            case "batch":
            case "selector":
                break;
            case "zstd":
                p.setCompressType(CompressionType.ZSTD);
                break;
            case "lz4":
                p.setCompressType(CompressionType.LZ4);
                break;
            case "retries":
                p.setRetryTimesWhenSendFailed(5);
                p.setRetryAnotherBrokerWhenNotStoreOK(true);
                break;
            default:
                throw new IllegalArgumentException("unknown mode " + mode);
        }
        p.start();
        try {
            if ("batch".equals(mode)) {
                sendBatches(p, lines, s);
            } else {
                sendEach(p, mode, lines, s);
            }
        } finally {
            p.shutdown();
        }
    }

    private static void sendEach(DefaultMQProducer p, String mode, List<Line> lines, Summary s) throws Exception {
        MessageQueueSelector byShard = (mqs, msg, arg) -> mqs.get(Math.floorMod(arg.hashCode(), mqs.size()));
        List<String> ids = new ArrayList<>();
        for (int i = 0; i < lines.size(); i++) {
            Line l = lines.get(i);
            Message m = message(l);
            if (l.retryOf != null && "retries".equals(mode)) {
                MessageAccessor.putProperty(m, MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, ids.get(l.retryOf));
                s.retries++;
            }
            SendResult r;
            if ("selector".equals(mode)) {
                if (l.shard == null || l.shard.isEmpty()) {
                    throw new IllegalArgumentException("line " + (i + 1) + ": selector mode needs a shard");
                }
                r = p.send(m, byShard, l.shard);
            } else {
                r = p.send(m);
            }
            ids.add(acknowledged(r, i));
            s.sent++;
        }
        s.messageIds.addAll(ids);
    }

    private static void sendBatches(DefaultMQProducer p, List<Line> lines, Summary s) throws Exception {
        int i = 0;
        while (i < lines.size()) {
            List<Message> batch = new ArrayList<>();
            Integer n = lines.get(i).batch;
            int first = i;
            do {
                batch.add(message(lines.get(i)));
                i++;
            } while (n != null && i < lines.size() && n.equals(lines.get(i).batch));
            SendResult r = p.send(batch);
            String ids = acknowledged(r, first);
            for (String id : ids.split(",")) {
                s.messageIds.add(id);
            }
            s.sent += batch.size();
            s.batches++;
        }
    }

    private static void publishTransactional(Args args, List<Line> lines, Summary s) throws Exception {
        CheckBacks checked = new CheckBacks();
        TransactionMQProducer p = new TransactionMQProducer(args.get("group"));
        p.setNamesrvAddr(args.get("namesrv"));
        timeouts(p);
        p.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return state(((Line) arg).tx);
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                int i = Integer.parseInt(msg.getUserProperty(LINE_PROPERTY));
                String tx = lines.get(i).tx;
                if ("unknown".equals(tx)) {
                    checked.add(i);
                    return LocalTransactionState.COMMIT_MESSAGE;
                }
                return state(tx);
            }
        });
        p.start();
        try {
            for (int i = 0; i < lines.size(); i++) {
                Line l = lines.get(i);
                Message m = message(l);
                m.putUserProperty(LINE_PROPERTY, Integer.toString(i));
                TransactionSendResult r = p.sendMessageInTransaction(m, l);
                s.messageIds.add(acknowledged(r, i));
                s.sent++;
                LocalTransactionState want = state(l.tx);
                if (r.getLocalTransactionState() != want) {
                    throw new IllegalStateException("line " + (i + 1) + ": local transaction " + r.getLocalTransactionState() + ", want " + want);
                }
                switch (l.tx) {
                    case "commit":
                        s.committed++;
                        break;
                    case "unknown":
                        s.unknown++;
                        break;
                    default:
                        s.rolledBack++;
                }
            }
            checked.await(s.unknown, Long.parseLong(args.get("check-wait-seconds", "120")));
            s.checkedBack = checked.count();
            if (s.checkedBack > 0) {
                // Let the commit of the last check-back (a one-way request)
                // leave before the client shuts down.
                TimeUnit.SECONDS.sleep(2);
            }
        } finally {
            p.shutdown();
        }
    }

    /**
     * Generous timeouts: the suite shares a small machine with the broker,
     * the name server and other tests; a slow answer is not what it tests.
     */
    private static void timeouts(DefaultMQProducer p) {
        p.setSendMsgTimeout(30_000);
        p.setMqClientApiTimeout(30_000);
    }

    private static LocalTransactionState state(String tx) {
        if (tx == null) {
            throw new IllegalArgumentException("tx mode: every line needs tx (commit, unknown or rollback)");
        }
        switch (tx) {
            case "commit":
                return LocalTransactionState.COMMIT_MESSAGE;
            case "unknown":
                return LocalTransactionState.UNKNOW;
            case "rollback":
                return LocalTransactionState.ROLLBACK_MESSAGE;
            default:
                throw new IllegalArgumentException("tx " + tx + ": want commit, unknown or rollback");
        }
    }

    private static Message message(Line l) {
        Message m = new Message(l.topic, l.bodyBytes());
        if (l.hasTag()) {
            m.setTags(l.tag);
        }
        if (!l.keyList().isEmpty()) {
            m.setKeys(l.keyList());
        }
        for (Map.Entry<String, String> e : l.propertyMap().entrySet()) {
            m.putUserProperty(e.getKey(), e.getValue());
        }
        return m;
    }

    /** Returns the message ID of an acknowledged send, or fails. */
    private static String acknowledged(SendResult r, int line) {
        if (r == null || r.getSendStatus() != SendStatus.SEND_OK) {
            throw new IllegalStateException("line " + (line + 1) + ": send answered " + (r == null ? "nothing" : r.getSendStatus()));
        }
        return r.getMsgId();
    }
}
