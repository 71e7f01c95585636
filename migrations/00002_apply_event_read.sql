-- orderflow schema, version 2: the locked read of ApplyEvent.

-- +goose Up

-- orderflow_lock_and_read(order_id, version) is the first step of every
-- ApplyEvent transaction, in one round trip:
--   1. pg_advisory_xact_lock(hashtextextended(order_id, 0)) serializes the
--      transactions that apply events of the same order, including the
--      first events of an order that has no row yet (a row lock would have
--      nothing to lock); the lock is held until the transaction ends;
--   2. then it reads the order and the order_events row of the business key
--      (order_id, version), one row, NULL columns for what does not exist.
-- The function is VOLATILE so that the read takes a fresh snapshot *after*
-- the lock is granted (READ COMMITTED) and sees everything the previous
-- holder committed; a single SELECT with the lock inside would read with a
-- snapshot taken before it waited. The decision itself stays in Go (package
-- fsm); this function only locks and reads.
-- +goose StatementBegin
CREATE FUNCTION orderflow_lock_and_read(p_order_id text, p_version bigint)
RETURNS TABLE (
    o_user_id bigint, o_status text, o_version bigint, o_amount_cents bigint, o_content_hash text,
    o_purchased boolean, o_purchase_points bigint, o_refunded boolean,
    e_content_hash text, e_outcome text, e_gap boolean, e_points_kind text, e_points_delta bigint,
    e_reason text
)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_order_id, 0));
    RETURN QUERY
        SELECT o.user_id, o.status, o.version, o.amount_cents, o.content_hash,
               o.purchased, o.purchase_points, o.refunded,
               ev.content_hash, ev.outcome, ev.gap, ev.points_kind, ev.points_delta, ev.reason
        FROM (SELECT 1) AS one
        LEFT JOIN orders AS o ON o.order_id = p_order_id
        LEFT JOIN order_events AS ev ON ev.order_id = p_order_id AND ev.version = p_version;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION orderflow_lock_and_read(text, bigint);
