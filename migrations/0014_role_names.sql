-- Roles (docs/rest-api.md "Roles"): a role's name is unique, as Parse Server's unique index on
-- `_Role.name`; RoleWriter checks first for Parse's error, this index settles concurrent creates.
CREATE UNIQUE INDEX IF NOT EXISTS objects_role_name ON objects ((data->>'name')) WHERE class_name = '_Role';
