-- orderflow schema, version 1.
--
-- The business key of an order event is (order_id, version). Exactly-once
-- effects rest on three unique keys, each checked by PostgreSQL inside the
-- transaction that writes the business effect:
--   * order_events (order_id, version): one row per business key, ever;
--   * orders (order_id) with the version guard evaluated inside the write
--     (INSERT ... ON CONFLICT DO UPDATE ... WHERE orders.version < EXCLUDED.version);
--   * points_ledger (order_id, kind): at most one purchase and one refund.
-- ApplyEvent (package store) reads an order, decides with package fsm,
-- and writes the order and its order_events row in ONE statement whose
-- upsert also compares the version it read (optimistic concurrency): a
-- concurrent writer makes it affect no row, or a unique violation rolls it
-- back, and ApplyEvent reads and decides again.
-- Lifecycle states, outcomes and points kinds mirror package fsm; change them
-- together.

-- orderflow: expand. Additive: a binary of the schema before runs on it.

-- +goose Up

-- orders: the current snapshot of every order, as the highest-version event
-- the lifecycle accepted left it. The points columns are the points *due*,
-- decided in the same transaction as the state change: purchased and
-- purchase_points are set the first time the order is applied at a paid
-- status (PAID, SHIPPED, DELIVERED, COMPLETED), refunded when an order that
-- earned purchase points is applied at CANCELLED.
CREATE TABLE orders (
    order_id        text        PRIMARY KEY
                                CHECK (order_id ~ '^[A-Za-z0-9_.:-]{1,64}$'),
    user_id         bigint      NOT NULL CHECK (user_id > 0),
    status          text        NOT NULL
                                CHECK (status IN ('CREATED', 'PAID', 'SHIPPED', 'DELIVERED', 'COMPLETED', 'CANCELLED')),
    -- version of the event that set this snapshot; never decreases.
    version         bigint      NOT NULL CHECK (version >= 1),
    amount_cents    bigint      NOT NULL CHECK (amount_cents >= 0),
    -- fsm.Event.ContentHash of the event that set this snapshot (hex SHA-256).
    content_hash    text        NOT NULL CHECK (content_hash ~ '^[0-9a-f]{64}$'),
    purchased       boolean     NOT NULL DEFAULT false,
    purchase_points bigint      NOT NULL DEFAULT 0 CHECK (purchase_points >= 0),
    refunded        boolean     NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT orders_refund_needs_purchase CHECK (NOT refunded OR purchased),
    CONSTRAINT orders_points_need_purchase CHECK (purchased OR purchase_points = 0)
);

-- order_events: every business key ever seen, once, with the first decision
-- taken on it. A repeat delivery of the same content only increments
-- times_seen and last_seen_at; the stored decision is returned again, so a
-- retry after a lost commit gets the same answer. A delivery of the same
-- business key with different content (a conflict) is never applied: it
-- increments conflicts (one per conflicting delivery, retries included) and
-- is parked in dead_letters. The table outlives Temporal's retention and is
-- the complete audit of the stream: applied, stale and illegal events alike.
CREATE TABLE order_events (
    order_id      text        NOT NULL REFERENCES orders (order_id),
    version       bigint      NOT NULL CHECK (version >= 1),
    -- event_id of the first delivery (tracing only; not part of the content).
    event_id      text        NOT NULL,
    user_id       bigint      NOT NULL CHECK (user_id > 0),
    status        text        NOT NULL
                              CHECK (status IN ('CREATED', 'PAID', 'SHIPPED', 'DELIVERED', 'COMPLETED', 'CANCELLED')),
    amount_cents  bigint      NOT NULL CHECK (amount_cents >= 0),
    -- fsm.Event.ContentHash: the content that decides duplicate vs conflict.
    content_hash  text        NOT NULL CHECK (content_hash ~ '^[0-9a-f]{64}$'),
    -- The first decision on this business key (fsm.Decision).
    outcome       text        NOT NULL
                              CHECK (outcome IN ('applied', 'stale', 'duplicate', 'conflict', 'illegal')),
    -- true when the event was applied over at least one missing version.
    gap           boolean     NOT NULL DEFAULT false,
    -- points effect of the event: '' (none), 'purchase' (+N) or 'refund' (-N).
    points_kind   text        NOT NULL DEFAULT ''
                              CHECK (points_kind IN ('', 'purchase', 'refund')),
    points_delta  bigint      NOT NULL DEFAULT 0,
    reason        text        NOT NULL DEFAULT '',
    occurred_at   timestamptz NOT NULL,
    times_seen    integer     NOT NULL DEFAULT 1 CHECK (times_seen >= 1),
    conflicts     integer     NOT NULL DEFAULT 0 CHECK (conflicts >= 0),
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    last_seen_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (order_id, version),
    CONSTRAINT order_events_points_sign CHECK (
        (points_kind = '' AND points_delta = 0)
        OR (points_kind = 'purchase' AND points_delta >= 0)
        OR (points_kind = 'refund' AND points_delta <= 0)),
    CONSTRAINT order_events_points_only_when_applied CHECK (points_kind = '' OR outcome = 'applied')
);

-- No secondary index: every query of the service reads one order's rows
-- (primary key prefix). Orders are listed by status through Temporal's
-- OrderStatus search attribute, not here.

-- points_ledger: loyalty points, one signed row per effect: a purchase row
-- of +N (a purchase of 0 points still gets its row, so "the purchase was
-- awarded" is always visible) and a refund row of -N taking the same points
-- back. SUM(points) is the balance. UNIQUE (order_id, kind) is the last line
-- of defence: whatever is redelivered, retried or crashed, never a second row.
CREATE TABLE points_ledger (
    id         bigserial   PRIMARY KEY,
    order_id   text        NOT NULL REFERENCES orders (order_id),
    user_id    bigint      NOT NULL CHECK (user_id > 0),
    kind       text        NOT NULL CHECK (kind IN ('purchase', 'refund')),
    points     bigint      NOT NULL,
    -- version of the event that earned (or took back) the points.
    version    bigint      NOT NULL CHECK (version >= 1),
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT points_ledger_order_kind_key UNIQUE (order_id, kind),
    CONSTRAINT points_ledger_sign CHECK (
        (kind = 'purchase' AND points >= 0) OR (kind = 'refund' AND points <= 0))
);

-- A user's balance: SUM(points) WHERE user_id = $1.
CREATE INDEX points_ledger_user_idx ON points_ledger (user_id);

-- dead_letters: messages that could not be applied (malformed, invalid,
-- oversize, conflicting), stored raw with the reason, for inspection and
-- compensation. fingerprint is the hex SHA-256 of (topic, keys, body), so a
-- repeat of the same message (broker redelivery or producer retry, whatever
-- its message ID) increments times_seen instead of adding a row; the first
-- message_id, tags and reason are kept.
CREATE TABLE dead_letters (
    id            bigserial   PRIMARY KEY,
    fingerprint   text        NOT NULL UNIQUE CHECK (fingerprint ~ '^[0-9a-f]{64}$'),
    topic         text        NOT NULL DEFAULT '',
    message_id    text        NOT NULL DEFAULT '',
    keys          text        NOT NULL DEFAULT '',
    tags          text        NOT NULL DEFAULT '',
    body          bytea       NOT NULL,
    reason        text        NOT NULL CHECK (reason <> '' AND length(reason) <= 1024),
    times_seen    integer     NOT NULL DEFAULT 1 CHECK (times_seen >= 1),
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    last_seen_at  timestamptz NOT NULL DEFAULT now()
);

-- Listing dead letters by reason (e.g. every conflict: reason LIKE 'conflict:%').
CREATE INDEX dead_letters_reason_idx ON dead_letters (reason text_pattern_ops);

-- +goose Down
DROP TABLE dead_letters;
DROP TABLE points_ledger;
DROP TABLE order_events;
DROP TABLE orders;
