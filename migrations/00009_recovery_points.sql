-- Recovery points (docs/design.md §2.10): where each broker queue must
-- restart after the database is restored from a backup, proved by the
-- database itself, as an exactly-once sink keeps its consumer offsets in
-- its own transactions.
--
-- message_receipts: one row per broker message whose effect the database
-- holds: written by the worker right after the write that applied, judged
-- stale or parked the message's event, and by the bridge for a message it
-- settles itself (a confirmed duplicate, a message parked in dead_letters).
-- A queue is named by its topic (the retry topic for a redelivered
-- message), broker and queue ID; queue_offset is the message's offset in it.
--
-- recovery_points: per queue, next_offset is the first offset whose
-- message's effect the database may lack: every message below it has a
-- receipt (or was consumed before the queue's point was first recorded,
-- since). The bridge records a queue's point once, from the broker's
-- committed offset, before it consumes; it then moves the point over the
-- contiguous receipts above it and deletes them. `orderflow recover`
-- restarts each queue at its point's first offset without a receipt.

-- orderflow: expand. Additive: a binary of the schema before runs on it.

-- +goose Up

CREATE TABLE recovery_points (
    topic       text        NOT NULL CHECK (topic <> ''),
    broker      text        NOT NULL CHECK (broker <> ''),
    queue_id    integer     NOT NULL CHECK (queue_id >= 0),
    next_offset bigint      NOT NULL CHECK (next_offset >= 0),
    since       timestamptz NOT NULL DEFAULT now(),
    moved_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (topic, broker, queue_id)
);

CREATE TABLE message_receipts (
    topic        text   NOT NULL,
    broker       text   NOT NULL,
    queue_id     integer NOT NULL,
    queue_offset bigint NOT NULL CHECK (queue_offset >= 0),
    PRIMARY KEY (topic, broker, queue_id, queue_offset)
);

-- +goose Down

DROP TABLE message_receipts;
DROP TABLE recovery_points;
