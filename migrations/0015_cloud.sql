-- Cloud Code through webhooks (ParleyCloud, docs/cloud-code.md): the registered hooks (Parse's
-- `_Hooks`), after-trigger deliveries waiting to be sent, and background jobs (`_JobStatus`).

-- A function hook has `function_name`; a trigger hook has `class_name` and `trigger_name`.
CREATE TABLE cloud_hooks (
    id            bigserial PRIMARY KEY,
    function_name text,
    class_name    text,
    trigger_name  text,
    url           text NOT NULL,
    CHECK ((function_name IS NOT NULL AND class_name IS NULL AND trigger_name IS NULL)
        OR (function_name IS NULL AND class_name IS NOT NULL AND trigger_name IS NOT NULL))
);
CREATE UNIQUE INDEX cloud_hooks_function ON cloud_hooks (function_name) WHERE function_name IS NOT NULL;
CREATE UNIQUE INDEX cloud_hooks_trigger ON cloud_hooks (class_name, trigger_name) WHERE class_name IS NOT NULL;

-- One webhook call to make at least once: an after* trigger (kind 'trigger') or a job run
-- (kind 'job', `job_id` naming its cloud_jobs row). Deleted once the webhook answered; `dead`
-- after the configured attempts. `leased_until` is set while a node is sending it.
CREATE TABLE cloud_deliveries (
    id           bigserial PRIMARY KEY,
    kind         text NOT NULL CHECK (kind IN ('trigger', 'job')),
    url          text NOT NULL,
    body         text NOT NULL,
    job_id       text,
    state        text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sending', 'dead')),
    attempts     integer NOT NULL DEFAULT 0,
    due_at       timestamptz NOT NULL DEFAULT now(),
    leased_until timestamptz,
    last_error   text,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX cloud_deliveries_due ON cloud_deliveries (due_at) WHERE state = 'pending';
CREATE INDEX cloud_deliveries_leased ON cloud_deliveries (leased_until) WHERE state = 'sending';

-- `_JobStatus`: one row per `POST /jobs/:name`.
CREATE TABLE cloud_jobs (
    object_id   text PRIMARY KEY,
    job_name    text NOT NULL,
    params      jsonb NOT NULL DEFAULT '{}',
    status      text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'running', 'succeeded', 'failed')),
    message     text,
    source      text NOT NULL DEFAULT 'api',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz
);
CREATE INDEX cloud_jobs_created ON cloud_jobs (created_at);
