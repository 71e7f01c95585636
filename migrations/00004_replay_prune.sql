-- Operating orderflow: replayed dead letters and pruned orders.
--
-- dead_letters.replayed_at and replay_outcome: `orderflow dlq replay`
-- re-delivers a parked message that is a valid event to its order's
-- workflow, then records when and with which outcome. A replayed dead
-- letter is never delivered again, so replaying twice does nothing new.
-- Messages that are still invalid, and conflicts, are not re-delivered and
-- stay as they are (both NULL).
--
-- orders.events_pruned_at: `orderflow prune` removes the order_events rows
-- (and the dead letters) of orders that have been COMPLETED or CANCELLED
-- for longer than a retention window, and stamps the order. The orders row
-- and the points ledger stay forever, so a late copy of a pruned business
-- key still changes nothing; the audit checks such an order's ledger
-- against its orders row instead of its (removed) decisions.

-- orderflow: expand. Additive: a binary of the schema before runs on it.

-- +goose Up

ALTER TABLE dead_letters ADD COLUMN replayed_at timestamptz;
-- The replayed event's decision as order_events recorded it, or 'delivered'
-- when the workflow had not recorded it yet when the replay stopped waiting.
ALTER TABLE dead_letters ADD COLUMN replay_outcome text
    CHECK (replay_outcome IN ('applied', 'stale', 'duplicate', 'conflict', 'illegal', 'delivered'));
ALTER TABLE dead_letters ADD CONSTRAINT dead_letters_replay_pair
    CHECK ((replayed_at IS NULL) = (replay_outcome IS NULL));

-- When prune last removed the order's order_events rows (NULL: never).
ALTER TABLE orders ADD COLUMN events_pruned_at timestamptz;

-- +goose Down

ALTER TABLE orders DROP COLUMN events_pruned_at;
ALTER TABLE dead_letters DROP CONSTRAINT dead_letters_replay_pair;
ALTER TABLE dead_letters DROP COLUMN replay_outcome;
ALTER TABLE dead_letters DROP COLUMN replayed_at;
