package domain

import (
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func TestHashPassword(t *testing.T) {
	long := strings.Repeat("x", maxPassword)
	for _, c := range []struct {
		name, password string
		ok             bool
	}{
		{"72 bytes", long, true},
		{"73 bytes", long + "x", false},
		{"empty", "", false},
	} {
		h, err := HashPassword(c.password)
		switch {
		case !c.ok && ErrorCode(err) != EInvalid:
			t.Errorf("%s: HashPassword: %v (%s), want %s", c.name, err, ErrorCode(err), EInvalid)
		case c.ok && err != nil:
			t.Errorf("%s: HashPassword: %v", c.name, err)
		case c.ok:
			if cost, err := bcrypt.Cost([]byte(h)); err != nil || cost != passwordCost {
				t.Errorf("%s: cost %d, %v; want %d", c.name, cost, err, passwordCost)
			}
			if bcrypt.CompareHashAndPassword([]byte(h), []byte(c.password)) != nil {
				t.Errorf("%s: the password does not match its hash", c.name)
			}
		}
	}
}

func TestCheckPassword(t *testing.T) {
	long := strings.Repeat("x", maxPassword)
	h, err := bcrypt.GenerateFromPassword([]byte(long), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, hash, password string
		want                 bool
	}{
		{"right", string(h), long, true},
		{"wrong", string(h), long[1:], false},
		{"past 72 bytes", string(h), long + "y", false}, // bcrypt would take it for its first 72
		{"not a hash", "x", "x", false},
		{"no user", "", "ferry: no such user", false}, // the password of the hash compared against
	} {
		if got := CheckPassword(c.hash, c.password); got != c.want {
			t.Errorf("%s: CheckPassword = %v, want %v", c.name, got, c.want)
		}
	}
}
