-- order_events.times_seen counts distinct messages: the broker message IDs
-- (the producer's, kept across redeliveries) that carried the business key
-- with the recorded content and reached the database. A retry of the same
-- delivery (an activity or local activity run again, a redelivery of the
-- same message) no longer counts twice. The IDs are kept, up to 64 per key,
-- to tell a new message from a repeat; past 64, every repeat counts.
-- Duplicates the workflow recognises itself never reach the database: its
-- `state` query counts them.

-- orderflow: expand. Additive: a binary of the schema before runs on it.

-- +goose Up

ALTER TABLE order_events ADD COLUMN message_ids text[] NOT NULL DEFAULT '{}'
    CHECK (cardinality(message_ids) <= 64);

-- +goose Down

ALTER TABLE order_events DROP COLUMN message_ids;
