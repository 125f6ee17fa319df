-- +goose Up
-- An erased user (shop user delete, DELETE /api/v1/admin/users/{id}): the
-- row stays, so their orders keep their foreign key and the history its
-- totals, but the email, name and password hash are wiped and deleted_at
-- says when. The email becomes deleted+<id>@invalid: unique, and free for
-- the person to register again.
ALTER TABLE users ADD COLUMN deleted_at timestamptz;

-- +goose Down
ALTER TABLE users DROP COLUMN deleted_at;
