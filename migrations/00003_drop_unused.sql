-- orderflow schema, version 3.
--
-- Early development builds created two secondary indexes in version 1
-- (orders_status_idx, order_events_outcome_idx) and, in a version 2 that is
-- no longer shipped, a helper function orderflow_lock_and_read used by a
-- lock-based ApplyEvent. Nothing uses them any more: drop them where they
-- exist, so every database converges on the same schema. On a database
-- created from the current files this is a no-op.

-- +goose Up
DROP FUNCTION IF EXISTS orderflow_lock_and_read(text, bigint);
DROP INDEX IF EXISTS orders_status_idx;
DROP INDEX IF EXISTS order_events_outcome_idx;

-- +goose Down
-- Nothing to restore: the objects are not part of the schema.
SELECT 1;
