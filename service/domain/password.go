package domain

import (
	"sync"

	"golang.org/x/crypto/bcrypt"
)

// A user's password is kept only as its bcrypt hash (User.PasswordHash),
// at passwordCost. bcrypt ignores bytes past the 72nd: a longer password is
// refused rather than accepted for its first 72 bytes.
const (
	passwordCost = 12
	maxPassword  = 72
)

// HashPassword returns the hash of password to keep as a user's
// PasswordHash; EInvalid for an empty password or one longer than 72 bytes.
func HashPassword(password string) (string, error) {
	switch {
	case password == "":
		return "", Errorf(EInvalid, "empty password")
	case len(password) > maxPassword:
		return "", Errorf(EInvalid, "password longer than %d bytes", maxPassword)
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), passwordCost)
	if err != nil {
		return "", err
	}
	return string(h), nil
}

// noUserHash is compared against when a login names no user.
var noUserHash = sync.OnceValue(func() []byte {
	h, err := bcrypt.GenerateFromPassword([]byte("ferry: no such user"), passwordCost)
	if err != nil {
		panic(err)
	}
	return h
})

// CheckPassword reports whether password is the one hash (a PasswordHash)
// was made of. For hash "", a login that names no user, it compares all
// the same, so that its time does not tell whether the user exists.
func CheckPassword(hash, password string) bool {
	h := []byte(hash)
	if hash == "" {
		h = noUserHash()
	}
	ok := bcrypt.CompareHashAndPassword(h, []byte(password)) == nil
	return ok && hash != "" && len(password) <= maxPassword
}
