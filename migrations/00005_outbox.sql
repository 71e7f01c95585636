-- The producer's tables (package producer): per-producer sequence counters
-- and the outbox of transactional messages.
--
-- These tables belong to the database of whoever produces order events:
-- an upstream order service keeps them next to its own order table, so that
-- the outbox row commits in the same local transaction as the order. orderflow
-- applies this migration to its own database for `orderflow publish` and the
-- demo; an upstream service applies the same statements to its database,
-- with producer.CreateSchema or by copying producer.Schema into its own
-- migrations. The statements are idempotent (IF NOT EXISTS) for that reason.
--
-- producer_sequences: one row per producer ID. next_seq is the number the
-- next message gets. A send takes the row lock when it allocates its number
-- and keeps it until its local transaction ends, so the increment commits
-- only together with a message the broker stored (synchronous mode) or with
-- the outbox row (transactional mode): the numbers that reach the broker are
-- 1, 2, 3, ... without holes. The broker's check-back waits for the same
-- lock, so it never judges a local transaction that is still running.
--
-- producer_outbox: one row per transactional message whose local
-- transaction committed, written in that transaction. id is a random
-- identifier the half message carries as its property ORDERFLOW_OUTBOX_ID;
-- the check-back commits the half message when the row exists and rolls it
-- back when it does not. message_id is the broker's ID of the half message
-- (the committed message keeps it). Rows may be removed once the broker can
-- no longer check back (producer.PruneOutbox; hours after created_at).

-- orderflow: expand. Additive: a binary of the schema before runs on it.

-- +goose Up

CREATE TABLE IF NOT EXISTS producer_sequences (
    producer_id text        PRIMARY KEY
                            CHECK (producer_id <> '' AND length(producer_id) <= 128),
    next_seq    bigint      NOT NULL DEFAULT 1 CHECK (next_seq >= 1),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS producer_outbox (
    id           text        PRIMARY KEY CHECK (id <> ''),
    producer_id  text        NOT NULL,
    seq          bigint      NOT NULL CHECK (seq >= 1),
    topic        text        NOT NULL,
    keys         text        NOT NULL,
    tag          text        NOT NULL,
    body         bytea       NOT NULL,
    message_id   text        NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (producer_id, seq)
);

CREATE INDEX IF NOT EXISTS producer_outbox_created_at ON producer_outbox (created_at);

-- +goose Down

DROP TABLE IF EXISTS producer_outbox;
DROP TABLE IF EXISTS producer_sequences;
