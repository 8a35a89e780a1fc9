-- Parse's global config (`GET|PUT /config`, docs/rest-api.md "Config"): one row, the params
-- and which of them only the master key reads. Bounded so repeated PUTs cannot grow it without end.
CREATE TABLE global_config (
    id              integer PRIMARY KEY CHECK (id = 1),
    params          jsonb NOT NULL DEFAULT '{}' CHECK (pg_column_size(params) <= 1048576),
    master_key_only jsonb NOT NULL DEFAULT '{}'
);
