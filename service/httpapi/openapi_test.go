package httpapi

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"ferry/service/api"
)

type openAPIDoc struct {
	OpenAPI    string                                `json:"openapi"`
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas map[string]schema `json:"schemas"`
	} `json:"components"`
}

type schema struct {
	Type       string            `json:"type"`
	Format     string            `json:"format"`
	Ref        string            `json:"$ref"`
	Items      *schema           `json:"items"`
	Properties map[string]schema `json:"properties"`
}

func loadOpenAPI(t *testing.T) openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi %q, want 3.x", doc.OpenAPI)
	}
	return doc
}

// Every route is in the document, and the document has no other.
func TestOpenAPIRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	documented := map[string]bool{}
	for p, item := range doc.Paths {
		for m := range item {
			if m != "parameters" && m != "servers" {
				documented[strings.ToUpper(m)+" "+p] = true
			}
		}
	}
	served := map[string]bool{}
	for _, rt := range (&Server{}).routes() {
		p := rt.path
		if !strings.HasPrefix(p, "/") {
			p = "/" + p
		}
		served[rt.method+" "+p] = true
		if !documented[rt.method+" "+p] {
			t.Errorf("route %s %s is not in openapi.json", rt.method, p)
		}
	}
	for r := range documented {
		if !served[r] {
			t.Errorf("openapi.json describes %s, which is not served", r)
		}
	}
}

// The document's schemas have the fields, and JSON types, of the api
// package's documents.
func TestOpenAPISchemas(t *testing.T) {
	doc := loadOpenAPI(t)
	types := map[string]any{
		"Error": api.Error{}, "Result": api.Result{}, "Login": api.Login{}, "Token": api.Token{},
		"TokenList": api.TokenList{}, "SSHKey": api.SSHKey{}, "SSHKeyList": api.SSHKeyList{}, "Bookmark": api.Bookmark{}, "PauseInfo": api.PauseInfo{}, "PausedEndpoint": api.PausedEndpoint{}, "BookmarkList": api.BookmarkList{}, "BookmarkUpdate": api.BookmarkUpdate{}, "SubmissionID": api.SubmissionID{}, "FilterRule": api.FilterRule{},
		"Transfer": api.Transfer{}, "TransferItem": api.TransferItem{}, "Delete": api.Delete{},
		"DeleteItem": api.DeleteItem{}, "SubmitResult": api.SubmitResult{}, "Link": api.Link{},
		"FatalError": api.FatalError{}, "Task": api.Task{}, "TaskList": api.TaskList{},
		"TaskUpdate": api.TaskUpdate{}, "Cancel": api.Cancel{}, "Event": api.Event{}, "EventList": api.EventList{},
		"SuccessfulTransfer": api.SuccessfulTransfer{}, "SuccessfulTransfers": api.SuccessfulTransfers{},
		"FailedTransfer": api.FailedTransfer{}, "FailedTransfers": api.FailedTransfers{}, "Session": api.Session{},
		"SkippedError": api.SkippedError{}, "SkippedErrors": api.SkippedErrors{},
		"DeletedPath": api.DeletedPath{}, "DeletedPaths": api.DeletedPaths{},
		"PartialPath": api.PartialPath{}, "PartialPaths": api.PartialPaths{},
		"Server": api.Server{}, "Endpoint": api.Endpoint{}, "EndpointSpec": api.EndpointSpec{},
		"EndpointList": api.EndpointList{}, "ActivationRequirements": api.ActivationRequirements{},
		"ActivationRequirement": api.ActivationRequirement{}, "Activate": api.Activate{},
		"ActivationResult": api.ActivationResult{}, "ActivatedEndpoint": api.ActivatedEndpoint{}, "File": api.File{}, "FileList": api.FileList{},
		"Mkdir": api.Mkdir{}, "Rename": api.Rename{}, "Health": api.Health{},
		"Relay": api.Relay{}, "SetupKey": api.SetupKey{},
		"ServerStateList": api.ServerStateList{}, "ServerState": api.ServerState{}, "MoverState": api.MoverState{},
		"TransferDestination": api.TransferDestination{}, "TaskDestination": api.TaskDestination{},
	}
	for name, v := range types {
		s, ok := doc.Components.Schemas[name]
		if !ok {
			t.Errorf("openapi.json has no schema %s", name)
			continue
		}
		fields := jsonFields(reflect.TypeOf(v))
		for f, ft := range fields {
			p, ok := s.Properties[f]
			if !ok {
				t.Errorf("schema %s lacks %s", name, f)
				continue
			}
			if got, want := p.describe(), describe(ft); got != want {
				t.Errorf("schema %s.%s is %s, want %s", name, f, got, want)
			}
		}
		for f := range s.Properties {
			if _, ok := fields[f]; !ok {
				t.Errorf("schema %s has %s, which api.%s lacks", name, f, name)
			}
		}
	}
	for name := range doc.Components.Schemas {
		if _, ok := types[name]; !ok {
			t.Errorf("schema %s is no api document", name)
		}
	}
	// Every reference resolves.
	for _, ref := range refs(openAPI) {
		name, ok := strings.CutPrefix(ref, "#/components/schemas/")
		if _, found := doc.Components.Schemas[name]; ok && !found {
			t.Errorf("reference %s resolves to nothing", ref)
		}
	}
}

// jsonFields maps the JSON names of t's fields (embedded structs
// flattened) to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		switch {
		case name == "-":
		case f.Anonymous && name == "":
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
		default:
			out[name] = f.Type
		}
	}
	return out
}

var timeType = reflect.TypeFor[time.Time]()

// describe is a Go type's JSON shape: string, integer, boolean,
// date-time, array of X, or object.
func describe(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == timeType:
		return "date-time"
	case t.Kind() == reflect.String:
		return "string"
	case t.Kind() == reflect.Bool:
		return "boolean"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		return "integer"
	case t.Kind() == reflect.Slice:
		return "array of " + describe(t.Elem())
	}
	return "object"
}

func (s schema) describe() string {
	switch {
	case s.Ref != "":
		return "object"
	case s.Format == "date-time":
		return "date-time"
	case s.Type == "array" && s.Items != nil:
		return "array of " + s.Items.describe()
	}
	return s.Type
}

// refs lists every "$ref" value of a JSON document.
func refs(doc []byte) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if r, ok := v["$ref"].(string); ok {
				out = append(out, r)
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	var v any
	json.Unmarshal(doc, &v)
	walk(v)
	slices.Sort(out)
	return slices.Compact(out)
}
