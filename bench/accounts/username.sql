-- pgbench script for bench/accounts/username.sh: the SQL QueryCompiler emits for an anonymous
-- GET /parse/users?where={"username":"<n>"}, with each $n written :pn (QueryBenchScriptTests
-- checks the text is identical). p1 (reader ids) comes from pgbench -D; p2 is a random seeded
-- username (the seeded usernames are the numbers 1..100000 as text).
\set p2 random(1, 100000)
SELECT object_id, created_at, updated_at, acl, data, username, email, email_verified FROM users WHERE (rperm && :p1::text[]) IS TRUE AND username = :p2::text ORDER BY object_id LIMIT 100;
