-- The mail outbox (docs/identity.md, "Mail"): every mail Parley sends is a row here first,
-- committed with whatever caused it (a signup, a reset request), so a crash loses no mail.
-- Workers claim due rows with FOR UPDATE SKIP LOCKED (several nodes share the work) and send
-- them over SMTP.
--
-- States: pending (due at next_attempt_at) → sending (claimed by a node until next_attempt_at)
-- → sent | pending again (a temporary failure, retried with backoff) | dead (the server
-- refused it for good, or the attempts are used up).

CREATE TABLE mail_outbox (
    id              bigserial PRIMARY KEY,
    state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sending', 'sent', 'dead')),
    -- What the mail is for: 'verifyEmail', 'passwordReset', or another caller's word.
    kind            text NOT NULL CHECK (length(kind) BETWEEN 1 AND 64),
    sender          text NOT NULL,
    sender_name     text,
    recipient       text NOT NULL,
    subject         text NOT NULL,
    text_body       text NOT NULL,
    html_body       text,
    attempts        integer NOT NULL DEFAULT 0,
    -- pending: when the mail is due; sending: when the claim expires (the node is presumed dead
    -- and the mail is due again).
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    node_id         text,
    last_error      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    sent_at         timestamptz
);

-- Claims (due mails in order) and recovery (claims that expired).
CREATE INDEX mail_outbox_due ON mail_outbox (next_attempt_at, id) WHERE state IN ('pending', 'sending');

-- How other modules queue a mail inside their own transaction (the accounts module's
-- verification and reset flows): they call this instead of writing the table. Returns the id.
CREATE FUNCTION mail_enqueue(p_kind text, p_sender text, p_sender_name text, p_recipient text, p_subject text,
                             p_text text, p_html text) RETURNS bigint
LANGUAGE sql AS $$
    INSERT INTO mail_outbox (kind, sender, sender_name, recipient, subject, text_body, html_body)
    VALUES (p_kind, p_sender, nullif(p_sender_name, ''), p_recipient, p_subject, p_text, p_html)
    RETURNING id;
$$;
