-- Per-user block lists (ParleyRealtime, `BlockList`; docs/realtime-protocol.md "Blocking"):
-- `blocker` blocked `blocked`, so `blocked`'s messages, call invites, presence and typing do
-- not reach `blocker`. A change is announced with `NOTIFY parley_blocks` (payload: the blocked
-- user) so every node drops its cached copy.
CREATE TABLE rt_blocks (
    blocker    text COLLATE "C" NOT NULL,
    blocked    text COLLATE "C" NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (blocker, blocked),
    CHECK (blocker <> blocked)
);
-- Who blocked a user (the check made on every send from that user, cached per node).
CREATE INDEX rt_blocks_blocked ON rt_blocks (blocked);
