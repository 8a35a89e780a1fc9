-- Calls (signalling only): one row per call with its timeline and outcome (docs/calls.md).
-- The live state of a call is in memory on the node that owns it (`node_id`); this row is the
-- record, rewritten on every state change and final once `state = 'ended'`.

CREATE TABLE calls (
    -- The callId as the caller spelled it (a UUID, any case), unique regardless of case.
    id             text PRIMARY KEY CHECK (id ~ '^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$'),
    caller_id      text NOT NULL,
    caller_device  text NOT NULL,
    callee_id      text NOT NULL,
    answer_device  text,
    video          boolean NOT NULL,
    headers        jsonb NOT NULL DEFAULT '{}',
    state          text NOT NULL CHECK (state IN ('initiating', 'progressing', 'ringing', 'answered', 'established', 'ended')),
    node_id        text,
    started_at     timestamptz NOT NULL,
    progressed_at  timestamptz,
    rung_at        timestamptz,
    answered_at    timestamptz,
    established_at timestamptz,
    ended_at       timestamptz,
    end_cause      text CHECK (end_cause IN ('canceled', 'denied', 'busy', 'noAnswer', 'timeout', 'hungUp', 'inactive', 'failure')),
    error          text,
    CHECK ((state = 'ended') = (ended_at IS NOT NULL AND end_cause IS NOT NULL))
);

CREATE UNIQUE INDEX calls_id_lower ON calls (lower(id));
-- History of one user, newest first, as caller and as callee (GET /v1/calls pages by (started_at, id)).
CREATE INDEX calls_caller_started ON calls (caller_id, started_at DESC, id DESC);
CREATE INDEX calls_callee_started ON calls (callee_id, started_at DESC, id DESC);
-- Calls not ended yet (few): found at start to close those a stopped node left behind.
CREATE INDEX calls_live ON calls (node_id) WHERE state <> 'ended';
