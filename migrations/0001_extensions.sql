-- Geo queries (GeoPoint near/within) use earthdistance on top of cube, with GiST indexes.
CREATE EXTENSION IF NOT EXISTS cube;
CREATE EXTENSION IF NOT EXISTS earthdistance;
