-- Push delivery (docs/push.md): a job per push to send through a gorush-compatible gateway to a
-- device that was offline when an event was queued for it. Jobs are created in the enqueueing
-- transaction (rt_on_offline_enqueue below), so an event is never committed without its push.
--
-- States: pending (due at next_attempt_at) → sending (claimed by a node until next_attempt_at)
-- → sent | pending again (retry with backoff) | dead (attempts used up) | rejected (the gateway
-- refused the token) | skipped (no gateway configured) | canceled (the call ended or the device
-- received the events first) | expired (the call's expiresAt passed).

CREATE TABLE push_jobs (
    id              bigserial PRIMARY KEY,
    -- 'message': an alert, one per device and conversation while pending; 'call': a VoIP push
    -- (iOS, voipDeviceToken) or a high-priority data message (Android).
    kind            text NOT NULL CHECK (kind IN ('message', 'call')),
    state           text NOT NULL DEFAULT 'pending'
                    CHECK (state IN ('pending', 'sending', 'sent', 'dead', 'rejected', 'skipped', 'canceled', 'expired')),
    user_id         text NOT NULL,
    -- The installationId of the installation whose token is used.
    device_id       text NOT NULL,
    -- gorush's platform: 1 iOS, 2 Android.
    platform        smallint NOT NULL CHECK (platform IN (1, 2)),
    token           text NOT NULL,
    -- Pending jobs with the same key collapse: a conversation (hash of its participants) or 'call:<callId>'.
    collapse_key    text NOT NULL,
    -- The device-queue seq of the latest event the job covers: once the device acknowledged it,
    -- the push is moot. NULL for a job not tied to a queued event.
    seq             bigint,
    message_id      uuid,
    -- The message's sender or the caller.
    sender          text,
    message_count   integer NOT NULL DEFAULT 1,
    call_id         text,
    -- Call fields for the VoIP payload: callId, from, video, headers.
    payload         jsonb,
    expires_at      timestamptz,
    attempts        integer NOT NULL DEFAULT 0,
    -- pending: when the job is due; sending: when the claim expires (the node is presumed dead
    -- and the job is due again). One column for both keeps one index for claims and recovery.
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    -- The node that claimed it last.
    node_id         text,
    last_error      text,
    -- The last 20 attempts: {"at": start, "result": sent|retry|dead|rejected|lost, "error": …}.
    attempt_log     jsonb NOT NULL DEFAULT '[]',
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    sent_at         timestamptz
);

-- Few indexes, because every state change of a job writes a new row version into each index
-- whose predicate it matches (state is in the predicates, so no update is HOT).
-- At most one pending job per device and collapse key (messages of a conversation merge into it).
CREATE UNIQUE INDEX push_jobs_collapse ON push_jobs (user_id, device_id, collapse_key) WHERE state = 'pending';
-- Claims (due pending jobs in order) and recovery (claims that expired).
CREATE INDEX push_jobs_due ON push_jobs (next_attempt_at, id) WHERE state IN ('pending', 'sending');
-- Cancelling the push of a call that ended.
CREATE INDEX push_jobs_call ON push_jobs (call_id) WHERE call_id IS NOT NULL AND state = 'pending';
-- Dead letters (`parley push retry --dead`, the depth gauge). Other states are listed by id.
CREATE INDEX push_jobs_dead ON push_jobs (id) WHERE state = 'dead';

-- Replaces the realtime layer's no-op hook (migrations/0004_realtime.sql). Runs inside the
-- enqueueing transaction with the events queued for devices not connected to any node.
CREATE OR REPLACE FUNCTION rt_on_offline_enqueue(p_events rt_delivery[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    -- Messages to others (not the sender's own other devices) on devices with a push token:
    -- one pending alert per device and conversation; later messages update it (count, latest
    -- message) until a worker claims it.
    INSERT INTO push_jobs AS j (kind, user_id, device_id, platform, token, collapse_key, seq, message_id, sender, message_count)
    SELECT 'message', x.user_id, x.device_id, x.platform, x.token, x.conversation, x.seq, x.message_id, x.sender, x.n
      FROM (
        SELECT DISTINCT ON (e.user_id, e.device_id, c.conversation)
               e.user_id, e.device_id, e.seq, e.message_id, m.sender, c.conversation,
               CASE i.device_type WHEN 'ios' THEN 1 ELSE 2 END::smallint AS platform, i.device_token AS token,
               count(*) OVER (PARTITION BY e.user_id, e.device_id, c.conversation)::integer AS n
          FROM unnest(p_events) e
          JOIN rt_messages m ON m.id = e.message_id
          JOIN installations i ON i.installation_id = e.device_id AND i.user_id = e.user_id
         CROSS JOIN LATERAL (
               SELECT md5(array_to_string(ARRAY(SELECT DISTINCT p FROM unnest(m.recipients || m.sender) p ORDER BY p), ' ')) AS conversation
         ) c
         WHERE e.kind = 'message' AND e.user_id <> m.sender
           AND i.device_type IN ('ios', 'android') AND coalesce(i.device_token, '') <> ''
         ORDER BY e.user_id, e.device_id, c.conversation, e.seq DESC
      ) x
    ON CONFLICT (user_id, device_id, collapse_key) WHERE state = 'pending'
    DO UPDATE SET message_count = j.message_count + excluded.message_count,
                  message_id = CASE WHEN excluded.seq > j.seq THEN excluded.message_id ELSE j.message_id END,
                  sender = CASE WHEN excluded.seq > j.seq THEN excluded.sender ELSE j.sender END,
                  seq = greatest(j.seq, excluded.seq),
                  token = excluded.token,
                  platform = excluded.platform,
                  updated_at = now();

    -- Incoming calls: a VoIP push to iOS devices with a voipDeviceToken, a data message to
    -- Android devices with a deviceToken; it expires with the call.
    INSERT INTO push_jobs (kind, user_id, device_id, platform, token, collapse_key, seq, call_id, sender, payload, expires_at)
    SELECT 'call', e.user_id, e.device_id,
           CASE i.device_type WHEN 'ios' THEN 1 ELSE 2 END::smallint,
           CASE i.device_type WHEN 'ios' THEN i.voip_device_token ELSE i.device_token END,
           'call:' || (e.payload->>'callId'), e.seq, e.payload->>'callId', e.payload->>'from',
           jsonb_build_object('callId', e.payload->'callId', 'from', e.payload->'from', 'video', coalesce(e.payload->'video', 'false'),
                              'headers', coalesce(e.payload->'headers', '{}')),
           e.expires_at
      FROM unnest(p_events) e
      JOIN installations i ON i.installation_id = e.device_id AND i.user_id = e.user_id
     WHERE e.kind = 'call.incoming' AND e.payload ? 'callId'
       AND ((i.device_type = 'ios' AND coalesce(i.voip_device_token, '') <> '')
         OR (i.device_type = 'android' AND coalesce(i.device_token, '') <> ''))
    ON CONFLICT (user_id, device_id, collapse_key) WHERE state = 'pending' DO NOTHING;

    -- A call that ended before its push went out: the push is moot.
    IF EXISTS (SELECT 1 FROM unnest(p_events) e WHERE e.kind = 'call.ended') THEN
        PERFORM push_cancel_call(ARRAY(SELECT DISTINCT e.payload->>'callId' FROM unnest(p_events) e
                                        WHERE e.kind = 'call.ended' AND e.payload ? 'callId'));
    END IF;
END;
$$;

-- Cancels the pending pushes of calls (already claimed ones are in flight and go out).
CREATE FUNCTION push_cancel_call(p_call_ids text[]) RETURNS void
LANGUAGE sql AS $$
    UPDATE push_jobs
       SET state = 'canceled', last_error = 'the call ended before the push was sent', updated_at = now()
     WHERE call_id = ANY (p_call_ids) AND state = 'pending';
$$;

-- Calls are recorded by their owning node whatever the devices' state: a call that ends
-- cancels its pushes even when no call.ended event went to an offline device.
CREATE FUNCTION push_call_ended() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM push_cancel_call(ARRAY[NEW.id]);
    RETURN NEW;
END;
$$;

CREATE TRIGGER push_call_ended_insert AFTER INSERT ON calls
FOR EACH ROW WHEN (NEW.state = 'ended') EXECUTE FUNCTION push_call_ended();
CREATE TRIGGER push_call_ended_update AFTER UPDATE OF state ON calls
FOR EACH ROW WHEN (NEW.state = 'ended' AND OLD.state <> 'ended') EXECUTE FUNCTION push_call_ended();
