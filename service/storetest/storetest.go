// Package storetest is the conformance suite of domain.Store: every
// implementation passes it. Run checks each method and its documented
// edge cases on fresh stores; RunShared checks that two handles on one
// database, as two service processes have, never give one task to two
// workers, keep the claim limits and make one connect CA.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sync"
	"testing"
	"time"

	"ferry/service/domain"
)

// Open returns a new, empty store, closed when t ends. The suite calls it
// from parallel subtests.
type Open func(t *testing.T) domain.Store

// test is one test of the suite.
type test struct {
	name string
	fn   func(t *testing.T, open Open)
}

// Run runs the suite on the stores open makes.
func Run(t *testing.T, open Open) {
	var tests []test
	for _, group := range [][]test{accountTests, taskTests, leaseTests, connectTests} {
		tests = append(tests, group...)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open)
		})
	}
}

// RunShared runs the claim race on two handles a and b of one empty
// database, with half of the workers on each, makes the connect CA from
// both at once, and checks that what one handle asks of running work
// reaches the other's watchers.
func RunShared(t *testing.T, a, b domain.Store) {
	claimRace(t, a, b)
	initCARace(t, a, b)
	watchAcross(t, a, b)
}

// watchAcross has b cancel, change and cancel a file of running tasks,
// and change an endpoint a running task uses, while a watches: each
// task's ID must reach a's watcher within two seconds, and nothing else.
func watchAcross(t *testing.T, a, b domain.Store) {
	f := newFixture(t, b)
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	ids, err := a.Watch(ctx)
	f.ok(err)
	u := f.user("watched")
	ep := f.endpoint(u, "watched", false, 0)
	running := func() domain.Task {
		task := f.task(u, ep, ep, t0.Add(-time.Hour)) // before whatever the claim race left
		got, err := b.Claim(f.ctx, "w-watch", t0, lease, 0)
		f.ok(err)
		if got.ID != task.ID {
			t.Fatalf("claimed %s, want %s", got.ID, task.ID)
		}
		return task
	}
	expect := func(what, id string) {
		t.Helper()
		for {
			select {
			case got := <-ids:
				if got == "" {
					continue // a catch-all: look again
				}
				if got != id {
					t.Fatalf("%s: signal for task %s, want %s", what, got, id)
				}
				return
			case <-time.After(2 * time.Second):
				t.Fatalf("%s: no signal for task %s", what, id)
			}
		}
	}
	task := running()
	_, err = b.RequestCancel(f.ctx, u.ID, task.ID, t0)
	f.ok(err)
	expect("cancel", task.ID)
	f.ok(b.SetStatus(f.ctx, task.ID, "w-watch", domain.StatusFailed, "", nil, t0, nil))

	task = running()
	f.ok(b.CancelFile(f.ctx, u.ID, task.ID, "/src/a"))
	expect("cancel a file", task.ID)
	f.ok(b.UpdateTask(f.ctx, u.ID, task.ID, "new label", t0.Add(time.Hour)))
	expect("update", task.ID)
	ep.Servers = []string{"ftp://elsewhere.example:2811"}
	f.ok(b.UpdateEndpoint(f.ctx, ep))
	expect("endpoint changed", task.ID)
	f.ok(b.Progress(f.ctx, task.ID, "w-watch", domain.Batch{Delta: domain.Counters{Files: 1}}))
	select {
	case got := <-ids:
		if got != "" {
			t.Errorf("progress signaled task %s", got)
		}
	case <-time.After(300 * time.Millisecond):
	}
	cancel()
	for range ids { // closed once ctx ends
	}
}

// t0 is the suite's clock: times are in UTC, to the second.
var t0 = time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)

// lease is the lease workers take in the suite.
const lease = time.Minute

// fixture is a store and helpers that fail the test on any error.
type fixture struct {
	t   *testing.T
	s   domain.Store
	ctx context.Context
}

func newFixture(t *testing.T, s domain.Store) *fixture {
	return &fixture{t: t, s: s, ctx: context.Background()}
}

func (f *fixture) ok(err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) user(name string) domain.User {
	f.t.Helper()
	u := domain.User{Name: name, Email: name + "@example.org", PasswordHash: "hash of " + name}
	f.ok(f.s.CreateUser(f.ctx, &u))
	return u
}

func (f *fixture) endpoint(owner domain.User, name string, public bool, maxConcurrent int) domain.Endpoint {
	f.t.Helper()
	e := domain.Endpoint{OwnerID: owner.ID, Name: name, Description: "endpoint " + name,
		Servers: []string{"ftp://" + name + ".example:2811"}, Auth: domain.AuthAnonymous,
		Public: public, MaxConcurrent: maxConcurrent}
	f.ok(f.s.CreateEndpoint(f.ctx, &e))
	e.Owner = owner.Name
	return e
}

// task creates a transfer of u from src to dst requested at at.
func (f *fixture) task(u domain.User, src, dst domain.Endpoint, at time.Time) domain.Task {
	f.t.Helper()
	t := domain.Task{UserID: u.ID, Type: domain.TypeTransfer, SrcEndpoint: src.ID, DstEndpoint: dst.ID,
		RequestTime: at, Items: []domain.Item{{Src: "/src/", Dst: "/dst/", Recursive: true}}}
	f.ok(f.s.CreateTask(f.ctx, &t))
	t.Items = nil // as reads give it
	return t
}

func (f *fixture) get(id string) domain.Task {
	f.t.Helper()
	t, err := f.s.TaskByID(f.ctx, id)
	f.ok(err)
	return t
}

// claim claims a task for worker at now and checks that it is want.
func (f *fixture) claim(want domain.Task, worker string, now time.Time, perUser int) domain.Task {
	f.t.Helper()
	t, err := f.s.Claim(f.ctx, worker, now, lease, perUser)
	f.ok(err)
	if t.ID != want.ID {
		f.t.Fatalf("%s claimed task %s (%s), want %s (%s)", worker, t.ID, t.Label, want.ID, want.Label)
	}
	return t
}

// noClaim checks that there is nothing to claim at now.
func (f *fixture) noClaim(now time.Time, perUser int) {
	f.t.Helper()
	t, err := f.s.Claim(f.ctx, "w-none", now, lease, perUser)
	wantCode(f.t, err, domain.ENotFound)
	if err == nil {
		f.t.Fatalf("claimed %s (%s), want none", t.ID, t.Label)
	}
}

// events is every event of a task.
func (f *fixture) events(id string) []domain.Event {
	f.t.Helper()
	evs, _, err := f.s.Events(f.ctx, id, domain.Page{Limit: 1000})
	f.ok(err)
	return evs
}

// codes is the codes of events.
func codes(evs []domain.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Code
	}
	return out
}

// wantCode checks that err is an *domain.Error with code, or nil for "".
func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	var de *domain.Error
	switch {
	case code == "" && err != nil:
		t.Fatalf("error %v, want none", err)
	case code != "" && (!errors.As(err, &de) || de.Code != code):
		t.Fatalf("error %v, want an *domain.Error with code %s", err, code)
	}
}

// equal fails the test unless got and want are deeply equal.
func equal(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

var uuid4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func wantUUID(t *testing.T, id string) {
	t.Helper()
	if !uuid4.MatchString(id) {
		t.Fatalf("ID %q is not a random UUID", id)
	}
}

// errCase is a call expected to fail with a code.
type errCase struct {
	name string
	call func() error
	code string
}

func runErrCases(t *testing.T, cases []errCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { wantCode(t, c.call(), c.code) })
	}
}

// claimRace has workers on each store claim at once until nothing is
// left, first with no limits, then with per-user and endpoint limits, and
// checks that no task went to two workers and no limit was exceeded.
func claimRace(t *testing.T, stores ...domain.Store) {
	f := newFixture(t, stores[0])
	const workers, perUser = 8, 3 // the service's default per-user limit

	race := func(perUser int) map[string]int { // task ID → claims
		var mu sync.Mutex
		claims := map[string]int{}
		var wg sync.WaitGroup
		for i := range workers {
			s, worker := stores[i%len(stores)], fmt.Sprintf("w%d", i)
			wg.Go(func() {
				for {
					task, err := s.Claim(f.ctx, worker, t0, lease, perUser)
					if domain.IsNotFound(err) {
						return
					}
					if err != nil {
						t.Errorf("%s: %v", worker, err)
						return
					}
					mu.Lock()
					claims[task.ID]++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return claims
	}
	once := func(claims map[string]int) {
		t.Helper()
		for id, n := range claims {
			if n != 1 {
				t.Errorf("task %s claimed %d times", id, n)
			}
		}
	}

	// No limits: every task is claimed exactly once.
	free := f.endpoint(f.user("owner"), "free", true, 0)
	var all []domain.Task
	for i := range 3 {
		u := f.user(fmt.Sprintf("free%d", i))
		for j := range 8 {
			all = append(all, f.task(u, free, free, t0.Add(time.Duration(j)*time.Second)))
		}
	}
	claims := race(0)
	once(claims)
	if len(claims) != len(all) {
		t.Fatalf("%d of %d tasks claimed", len(claims), len(all))
	}

	// Limits: users limited0..2 get perUser tasks each; limited3's tasks
	// all use an endpoint that runs one at a time.
	one := f.endpoint(f.user("owner1"), "one", true, 1)
	byUser := map[string]int64{} // task ID → user
	for i := range 4 {
		u, dst := f.user(fmt.Sprintf("limited%d", i)), free
		if i == 3 {
			dst = one
		}
		for range 2 * perUser {
			byUser[f.task(u, free, dst, t0).ID] = u.ID
		}
	}
	claims = race(perUser)
	once(claims)
	perUserClaims := map[int64]int{}
	for id := range claims {
		perUserClaims[byUser[id]]++
	}
	if len(claims) != 3*perUser+1 {
		t.Errorf("%d tasks claimed under the limits, want %d (per user: %v)", len(claims), 3*perUser+1, perUserClaims)
	}
	for u, n := range perUserClaims {
		if n > perUser {
			t.Errorf("user %d runs %d tasks, over the limit of %d", u, n, perUser)
		}
	}
}
