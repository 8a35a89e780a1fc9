-- The Parse push API (`POST /parse/push`, docs/push.md): one `push_statuses` row per push
-- (Parse's `_PushStatus`) and one push job (kind 'parse') per matching installation, queued by
-- pages in their own transactions through `push_enqueue_parse`, so a push to a million
-- installations is never one transaction nor held in memory.

ALTER TABLE push_jobs DROP CONSTRAINT push_jobs_kind_check;
ALTER TABLE push_jobs ADD CONSTRAINT push_jobs_kind_check CHECK (kind IN ('message', 'call', 'parse'));
ALTER TABLE push_jobs ADD COLUMN push_status_id text;
CREATE INDEX push_jobs_push_status ON push_jobs (push_status_id) WHERE push_status_id IS NOT NULL;

-- status: pending (pages still to queue) → running (every job queued, some unsent) →
-- succeeded (`push_status_view` derives running/succeeded from the jobs). `cursor` is the last
-- installation objectId queued; a node pages while it holds `leased_until`, and another (or a
-- restarted) node resumes from `cursor` once the lease expired.
CREATE TABLE push_statuses (
    object_id           text PRIMARY KEY,
    query               jsonb NOT NULL,
    payload             jsonb NOT NULL,
    source              text NOT NULL DEFAULT 'rest',
    status              text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'queued', 'failed')),
    push_time           timestamptz,
    expires_at          timestamptz,
    expiration_interval bigint,
    num_queued          integer NOT NULL DEFAULT 0,
    cursor              text,
    leased_until        timestamptz,
    error_message       text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX push_statuses_pending ON push_statuses (leased_until) WHERE status = 'pending';

-- Queues one page of push `p_status`: `p_targets` is a JSON array of {installationId, userId,
-- platform (1 iOS, 2 Android), token, badge (optional: the installation's new badge)}. Records
-- `p_cursor` and renews the lease in the same transaction; `p_last` marks the push queued.
CREATE FUNCTION push_enqueue_parse(p_status text, p_targets jsonb, p_cursor text, p_last boolean, p_lease_ms bigint) RETURNS integer
LANGUAGE sql AS $$
    WITH s AS (SELECT payload, push_time, expires_at FROM push_statuses WHERE object_id = p_status),
    queued AS (
        INSERT INTO push_jobs (kind, user_id, device_id, platform, token, collapse_key, payload, expires_at, next_attempt_at, push_status_id)
        SELECT 'parse', coalesce(t->>'userId', ''), t->>'installationId', (t->>'platform')::smallint, t->>'token', 'push:' || p_status,
               CASE WHEN t ? 'badge' THEN jsonb_set(s.payload, '{badge}', t->'badge') ELSE s.payload END,
               s.expires_at, greatest(coalesce(s.push_time, now()), now()), p_status
          FROM s, jsonb_array_elements(p_targets) t
        ON CONFLICT DO NOTHING
        RETURNING 1
    )
    UPDATE push_statuses
       SET num_queued = num_queued + (SELECT count(*) FROM queued), cursor = p_cursor, updated_at = now(),
           status = CASE WHEN p_last THEN 'queued' ELSE status END,
           leased_until = CASE WHEN p_last THEN NULL ELSE now() + p_lease_ms * interval '1 millisecond' END
     WHERE object_id = p_status
    RETURNING num_queued;
$$;

-- Claims one push whose pages are still to be queued and whose lease expired (or was never
-- taken): its id and cursor.
CREATE FUNCTION push_claim_parse(p_lease_ms bigint) RETURNS TABLE (object_id text, query jsonb, payload jsonb, cursor text)
LANGUAGE sql AS $$
    UPDATE push_statuses p SET leased_until = now() + p_lease_ms * interval '1 millisecond', updated_at = now()
     WHERE p.object_id = (SELECT s.object_id FROM push_statuses s
                           WHERE s.status = 'pending' AND (s.leased_until IS NULL OR s.leased_until < now())
                           ORDER BY s.created_at LIMIT 1 FOR UPDATE SKIP LOCKED)
    RETURNING p.object_id, p.query, p.payload, p.cursor;
$$;

-- Records a new push (leased to the caller, which queues its pages next).
CREATE FUNCTION push_create_parse(p_id text, p_query jsonb, p_payload jsonb, p_push_time timestamptz, p_expires_at timestamptz,
                                  p_interval bigint, p_lease_ms bigint) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO push_statuses (object_id, query, payload, push_time, expires_at, expiration_interval, leased_until)
    VALUES (p_id, p_query, p_payload, p_push_time, p_expires_at, p_interval, now() + p_lease_ms * interval '1 millisecond');
$$;

-- `_PushStatus` as Parse answers it: running while jobs are unsent, succeeded once every job
-- is finished; numSent / numFailed from the jobs.
CREATE VIEW push_status_view AS
SELECT p.object_id, p.query, p.payload, p.source, p.push_time, p.expires_at, p.expiration_interval, p.num_queued,
       p.created_at, p.updated_at, p.error_message,
       coalesce(j.sent, 0) AS num_sent, coalesce(j.failed, 0) AS num_failed,
       CASE WHEN p.status = 'failed' THEN 'failed'
            WHEN p.status = 'pending' THEN CASE WHEN p.push_time > now() THEN 'scheduled' ELSE 'pending' END
            WHEN coalesce(j.open, 0) > 0 THEN CASE WHEN p.push_time > now() THEN 'scheduled' ELSE 'running' END
            ELSE 'succeeded' END AS status
  FROM push_statuses p
  LEFT JOIN LATERAL (
      SELECT count(*) FILTER (WHERE state = 'sent') AS sent,
             count(*) FILTER (WHERE state IN ('dead', 'rejected', 'expired')) AS failed,
             count(*) FILTER (WHERE state IN ('pending', 'sending')) AS open
        FROM push_jobs WHERE push_status_id = p.object_id
  ) j ON true;
