package sqlstore

import (
	"context"
	"strings"
	"time"

	"ferry/service/domain"
)

// CreateUser stores u and sets its ID and (if zero) Created.
func (db *DB) CreateUser(ctx context.Context, u *domain.User) (err error) {
	defer wrap(&err, "create user")
	nu := *u
	nu.Created = orNow(nu.Created)
	err = db.conn().row(ctx, `INSERT INTO users (name, email, password_hash, created) VALUES (?, ?, ?, ?) RETURNING id`,
		nu.Name, nu.Email, nu.PasswordHash, us(nu.Created)).Scan(&nu.ID)
	if db.d.unique(err) {
		return domain.Errorf(domain.EConflict, "user %s already exists", nu.Name)
	}
	if err != nil {
		return err
	}
	*u = nu
	return nil
}

const userCols = `id, name, email, password_hash, created`

func scanUser(r scanner) (domain.User, error) {
	var u domain.User
	err := r.Scan(&u.ID, &u.Name, &u.Email, &u.PasswordHash, timeCol{&u.Created})
	return u, err
}

func (db *DB) UserByName(ctx context.Context, name string) (_ domain.User, err error) {
	defer wrap(&err, "user by name")
	u, err := scanUser(db.conn().row(ctx, `SELECT `+userCols+` FROM users WHERE name = ?`, name))
	return u, missing(err, "user %s", name)
}

func (db *DB) UserByID(ctx context.Context, id int64) (_ domain.User, err error) {
	defer wrap(&err, "user by ID")
	u, err := scanUser(db.conn().row(ctx, `SELECT `+userCols+` FROM users WHERE id = ?`, id))
	return u, missing(err, "user %d", id)
}

func (db *DB) SetPassword(ctx context.Context, userID int64, hash string) (err error) {
	defer wrap(&err, "set password")
	n, err := db.conn().exec(ctx, `UPDATE users SET password_hash = ? WHERE id = ?`, hash, userID)
	return changed(n, err, "user %d", userID)
}

// Users lists every user, ordered by name.
func (db *DB) Users(ctx context.Context) (_ []domain.User, err error) {
	defer wrap(&err, "users")
	return all(ctx, db.conn(), scanUser, `SELECT `+userCols+` FROM users ORDER BY name`)
}

// RemoveUser deletes user id and all that is theirs (domain.Store).
func (db *DB) RemoveUser(ctx context.Context, id int64) (err error) {
	defer wrap(&err, "remove user")
	return db.inTx(ctx, func(c conn) error {
		if err := userInUse(ctx, c, id); err != nil {
			return err
		}
		for _, q := range removeUser {
			if _, err := c.exec(ctx, q, id); err != nil {
				return err
			}
		}
		n, err := c.exec(ctx, `DELETE FROM users WHERE id = ?`, id)
		return changed(n, err, "user %d", id)
	})
}

// userInUse is the EConflict of RemoveUser: the user's unfinished tasks,
// and the others' tasks and endpoints that need the user's endpoints.
func userInUse(ctx context.Context, c conn, id int64) error {
	for _, u := range []struct{ what, q string }{
		{"has unfinished tasks (they must be canceled or end first)",
			`SELECT id FROM tasks WHERE user_id = ? AND ` + unfinished + ` ORDER BY 1`},
		{"owns endpoints that other users' unfinished tasks use",
			`SELECT DISTINCT t.id FROM tasks t JOIN endpoints e ON e.id IN (t.src_endpoint, t.dst_endpoint)
			WHERE e.owner_id = ? AND t.` + unfinished + `
			UNION SELECT d.task_id FROM task_destinations d JOIN endpoints e ON e.id = d.endpoint JOIN tasks t ON t.id = d.task_id
			WHERE e.owner_id = ? AND t.` + unfinished + ` ORDER BY 1`},
		{"owns the head node of other users' endpoints",
			`SELECT u.name || '#' || b.name FROM endpoints b JOIN endpoints e ON e.id = b.via JOIN users u ON u.id = b.owner_id
			WHERE e.owner_id = ? AND b.owner_id <> e.owner_id ORDER BY 1`},
	} {
		args := make([]any, strings.Count(u.q, "?"))
		for i := range args {
			args[i] = id
		}
		names, err := all(ctx, c, scanString, u.q, args...)
		if err != nil {
			return err
		}
		if len(names) > 0 {
			return domain.Errorf(domain.EConflict, "the user %s: %s", u.what, strings.Join(names, ", "))
		}
	}
	return nil
}

// unfinished is the condition on tasks.status of a task not yet ended.
const unfinished = `status NOT IN ('` + domain.StatusSucceeded + `', '` + domain.StatusFailed + `')`

// removeUser deletes what is user ?'s, each row before those it names.
var removeUser = []string{
	`DELETE FROM file_records WHERE task_id IN (SELECT id FROM tasks WHERE user_id = ?)`,
	`DELETE FROM canceled_files WHERE task_id IN (SELECT id FROM tasks WHERE user_id = ?)`,
	`DELETE FROM events WHERE task_id IN (SELECT id FROM tasks WHERE user_id = ?)`,
	`DELETE FROM tasks WHERE user_id = ?`,
	`DELETE FROM tokens WHERE user_id = ?`,
	`DELETE FROM ssh_keys WHERE user_id = ?`,
	`DELETE FROM bookmarks WHERE user_id = ?`,
	`DELETE FROM activations WHERE user_id = ?`,
	`DELETE FROM endpoints WHERE owner_id = ?`,
}

// CreateToken stores t and sets its ID and (if zero) Created.
func (db *DB) CreateToken(ctx context.Context, t *domain.Token) (err error) {
	defer wrap(&err, "create token")
	nt := *t
	nt.Created, nt.Expires, nt.LastUsed = orNow(nt.Created), stored(nt.Expires), stored(nt.LastUsed)
	err = db.conn().row(ctx, `INSERT INTO tokens (user_id, kind, name, hash, created, expires, last_used, revoked)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		nt.UserID, nt.Kind, nt.Name, nt.Hash, us(nt.Created), us(nt.Expires), us(nt.LastUsed), nt.Revoked).Scan(&nt.ID)
	if db.d.unique(err) {
		return domain.Errorf(domain.EConflict, "a token with this secret already exists")
	}
	if err != nil {
		return err
	}
	*t = nt
	return nil
}

const tokenCols = `id, user_id, kind, name, hash, created, expires, last_used, revoked`

func scanToken(r scanner) (domain.Token, error) {
	var t domain.Token
	err := r.Scan(&t.ID, &t.UserID, &t.Kind, &t.Name, &t.Hash,
		timeCol{&t.Created}, timeCol{&t.Expires}, timeCol{&t.LastUsed}, &t.Revoked)
	return t, err
}

func (db *DB) TokenByHash(ctx context.Context, hash string) (_ domain.Token, err error) {
	defer wrap(&err, "token by hash")
	t, err := scanToken(db.conn().row(ctx, `SELECT `+tokenCols+` FROM tokens WHERE hash = ?`, hash))
	return t, missing(err, "token")
}

// Tokens lists userID's tokens, oldest first.
func (db *DB) Tokens(ctx context.Context, userID int64) (_ []domain.Token, err error) {
	defer wrap(&err, "tokens")
	return all(ctx, db.conn(), scanToken, `SELECT `+tokenCols+` FROM tokens WHERE user_id = ? ORDER BY id`, userID)
}

func (db *DB) RevokeToken(ctx context.Context, userID, tokenID int64) (err error) {
	defer wrap(&err, "revoke token")
	n, err := db.conn().exec(ctx, `UPDATE tokens SET revoked = TRUE WHERE id = ? AND user_id = ?`, tokenID, userID)
	return changed(n, err, "token %d", tokenID)
}

func (db *DB) TouchToken(ctx context.Context, tokenID int64, now time.Time) (err error) {
	defer wrap(&err, "touch token")
	n, err := db.conn().exec(ctx, `UPDATE tokens SET last_used = ? WHERE id = ?`, us(now), tokenID)
	return changed(n, err, "token %d", tokenID)
}

// AddSSHKey stores k and sets its ID and (if zero) Created.
func (db *DB) AddSSHKey(ctx context.Context, k *domain.SSHKey) (err error) {
	defer wrap(&err, "add SSH key")
	nk := *k
	nk.Created = orNow(nk.Created)
	err = db.conn().row(ctx, `INSERT INTO ssh_keys (user_id, line, fingerprint, created) VALUES (?, ?, ?, ?) RETURNING id`,
		nk.UserID, nk.Line, nk.Fingerprint, us(nk.Created)).Scan(&nk.ID)
	if db.d.unique(err) {
		return domain.Errorf(domain.EConflict, "SSH key %s is there already", nk.Fingerprint)
	}
	if err != nil {
		return err
	}
	*k = nk
	return nil
}

func scanSSHKey(r scanner) (domain.SSHKey, error) {
	var k domain.SSHKey
	err := r.Scan(&k.ID, &k.UserID, &k.Line, &k.Fingerprint, timeCol{&k.Created})
	return k, err
}

func (db *DB) SSHKeys(ctx context.Context, userID int64) (_ []domain.SSHKey, err error) {
	defer wrap(&err, "SSH keys")
	return all(ctx, db.conn(), scanSSHKey, `SELECT id, user_id, line, fingerprint, created FROM ssh_keys WHERE user_id = ? ORDER BY id`, userID)
}

func (db *DB) DeleteSSHKey(ctx context.Context, userID, keyID int64) (err error) {
	defer wrap(&err, "delete SSH key")
	n, err := db.conn().exec(ctx, `DELETE FROM ssh_keys WHERE id = ? AND user_id = ?`, keyID, userID)
	return changed(n, err, "SSH key %d", keyID)
}
