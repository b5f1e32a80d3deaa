package httpapi_test

import (
	"testing"
	"time"

	"ferry/service/api"
	"ferry/service/domain"
)

// TestPauseInfo: pause_info says whether a task is paused, why (the
// event that paused it), and which of its endpoints hold it with what
// resumes it.
func TestPauseInfo(t *testing.T) {
	for _, tc := range []struct {
		name      string
		activated []string // endpoints activated before the pause
		nice      string   // "": the task is not paused
		want      []api.PausedEndpoint
	}{
		{"not paused", nil, "", nil},
		{"source not activated", []string{"dst"}, domain.NiceNotActivated,
			[]api.PausedEndpoint{{DataType: "paused_endpoint", DisplayName: "alice#src", Resume: api.ResumeActivate}}},
		{"neither activated", nil, domain.NiceNotActivated, []api.PausedEndpoint{
			{DataType: "paused_endpoint", DisplayName: "alice#src", Resume: api.ResumeActivate},
			{DataType: "paused_endpoint", DisplayName: "alice#dst", Resume: api.ResumeActivate}}},
		// Refused though activated: activating again is what can help.
		{"credential refused", []string{"src", "dst"}, domain.NiceCredentialExpired, []api.PausedEndpoint{
			{DataType: "paused_endpoint", DisplayName: "alice#src", Resume: api.ResumeActivate},
			{DataType: "paused_endpoint", DisplayName: "alice#dst", Resume: api.ResumeActivate}}},
		{"destination full", []string{"src", "dst"}, domain.NiceNoSpace,
			[]api.PausedEndpoint{{DataType: "paused_endpoint", DisplayName: "alice#dst", Resume: api.ResumeFreeSpace}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			alice, _ := e.user("alice")
			ids := map[string]string{}
			for _, name := range []string{"src", "dst"} {
				ids["alice#"+name] = addEndpoint(t, alice, name, domain.AuthPassword, false).ID
			}
			for _, name := range tc.activated {
				if _, err := alice.Activate(t.Context(), name, api.Activate{Username: "carol", Password: "secret"}); err != nil {
					t.Fatal(err)
				}
			}
			task, err := alice.Transfer(t.Context(), api.Transfer{SourceEndpoint: "src", DestinationEndpoint: "dst",
				Data: []api.TransferItem{{SourcePath: "/a", DestinationPath: "/b"}}})
			if err != nil {
				t.Fatal(err)
			}
			why := "the reason, in words"
			if tc.nice != "" {
				if _, err := e.db.Claim(t.Context(), "w1", e.clock.Now(), time.Minute, 0); err != nil {
					t.Fatal(err)
				}
				ev := domain.Event{TaskID: task.TaskID, Code: domain.EventInactive, Description: why, IsError: true, Time: e.clock.Now()}
				if err := e.db.SetStatus(t.Context(), task.TaskID, "w1", domain.StatusInactive, tc.nice, nil, e.clock.Now(), []domain.Event{ev}); err != nil {
					t.Fatal(err)
				}
			}
			pi, err := alice.PauseInfo(t.Context(), task.TaskID)
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.want {
				tc.want[i].EndpointID = ids[tc.want[i].DisplayName]
			}
			want := api.PauseInfo{DataType: "pause_info", TaskID: task.TaskID, IsPaused: tc.nice != "", NiceStatus: tc.nice, Endpoints: tc.want}
			if tc.nice != "" {
				want.Description = why
			}
			if !equalJSON(t, pi, want) {
				t.Fatalf("pause_info: %+v\nwant %+v", pi, want)
			}
		})
	}
	e := newEnv(t)
	alice, _ := e.user("alice")
	bob, _ := e.user("bob")
	addEndpoint(t, alice, "a", domain.AuthAnonymous, false)
	task, err := alice.Transfer(t.Context(), api.Transfer{SourceEndpoint: "a", DestinationEndpoint: "a",
		Data: []api.TransferItem{{SourcePath: "/a", DestinationPath: "/b"}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bob.PauseInfo(t.Context(), task.TaskID)
	wantAPIError(t, err, 404, "NotFound")
}
