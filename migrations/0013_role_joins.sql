-- Roles (docs/rest-api.md "Roles"): the join tables of `_Role`'s two system relations, in Parse
-- Server's Postgres naming and columns, so the Relations storage and role membership share them.
-- users: owningId = the role, relatedId = a user. roles: owningId = the inheriting role,
-- relatedId = a role whose users (and inherited roles) it covers.
CREATE TABLE IF NOT EXISTS "_Join:users:_Role" (
    "relatedId" varchar(120) NOT NULL,
    "owningId"  varchar(120) NOT NULL,
    PRIMARY KEY ("relatedId", "owningId")
);
CREATE INDEX IF NOT EXISTS "_Join:users:_Role_owning" ON "_Join:users:_Role" ("owningId");
CREATE TABLE IF NOT EXISTS "_Join:roles:_Role" (
    "relatedId" varchar(120) NOT NULL,
    "owningId"  varchar(120) NOT NULL,
    PRIMARY KEY ("relatedId", "owningId")
);
CREATE INDEX IF NOT EXISTS "_Join:roles:_Role_owning" ON "_Join:roles:_Role" ("owningId");
