-- push_cancel_call (migrations/0006_push.sql) runs from the trigger on every call that ends.
-- As a LANGUAGE sql function called from PL/pgSQL its UPDATE was planned again on every call
-- (about 0.1 ms of PostgreSQL CPU per call, most of the trigger's cost); as PL/pgSQL its plan is
-- cached per connection. Same signature and effect.
CREATE OR REPLACE FUNCTION push_cancel_call(p_call_ids text[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE push_jobs
       SET state = 'canceled', last_error = 'the call ended before the push was sent', updated_at = now()
     WHERE call_id = ANY (p_call_ids) AND state = 'pending';
END;
$$;
