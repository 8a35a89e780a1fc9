-- pgbench script for bench/accounts/nearby.sh: the SQL QueryCompiler emits for an anonymous
-- GET /parse/users?where={"location":{"$nearSphere":…,"$maxDistanceInKilometers":…}}, with each
-- $n written :pn (QueryBenchScriptTests checks the text is identical). p1 (reader ids), p2 (the
-- GeoPoint guard) and p5 (the radius as a chord of the unit sphere, 2 sin(km / 6371 / 2)) come
-- from pgbench -D; p3/p4 are a random centre inside the seeded area (latitude 48.35-49.35,
-- longitude 1.6-3.1).
\set p3 48.45 + random(0, 800000) / 1000000.0
\set p4 1.8 + random(0, 1100000) / 1000000.0
SELECT object_id, created_at, updated_at, acl, data, username, email, email_verified FROM (SELECT *, geo <-> cube(cube(cube(earth() * cos(radians(:p3::float8)) * cos(radians(:p4::float8))), earth() * cos(radians(:p3::float8)) * sin(radians(:p4::float8))), earth() * sin(radians(:p3::float8))) AS nearest_distance FROM users WHERE (rperm && :p1::text[]) IS TRUE AND geo IS NOT NULL AND data @> :p2::jsonb ORDER BY nearest_distance LIMIT 100) AS nearest WHERE nearest_distance <= :p5::float8 * earth() ORDER BY nearest_distance LIMIT 100;
