-- The user who earned an order's purchase points. A refund takes the points
-- back from that user, whichever user the cancelling event names, and a
-- purchase row written late (after a crash between the state change and the
-- ledger insert) still goes to the user of the event that paid.

-- orderflow: contract, oldest binary 2. The CHECK below refuses what a
-- binary of schema 1 writes (a purchased order without purchase_user_id), so
-- no such binary may run on this schema.

-- +goose Up

-- orders.purchase_user_id: set together with purchased, by the same write.
ALTER TABLE orders ADD COLUMN purchase_user_id bigint CHECK (purchase_user_id > 0);

-- Orders purchased before this column existed: the purchase row's user, or,
-- without a row yet, the order's current user (what was used until now).
UPDATE orders AS o
SET purchase_user_id = COALESCE(
    (SELECT p.user_id FROM points_ledger AS p WHERE p.order_id = o.order_id AND p.kind = 'purchase'),
    o.user_id)
WHERE o.purchased;

ALTER TABLE orders ADD CONSTRAINT orders_purchase_user CHECK (NOT purchased OR purchase_user_id IS NOT NULL);

-- Refund rows written before this release took the cancelling event's user;
-- give the points back to the user who earned them.
UPDATE points_ledger AS r
SET user_id = p.user_id
FROM points_ledger AS p
WHERE r.kind = 'refund' AND p.kind = 'purchase' AND p.order_id = r.order_id AND r.user_id <> p.user_id;

-- +goose Down

ALTER TABLE orders DROP CONSTRAINT orders_purchase_user;
ALTER TABLE orders DROP COLUMN purchase_user_id;
