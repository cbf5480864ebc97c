package tools

import (
	"encoding/json"
	"testing"
)

func TestWords(t *testing.T) {
	out, err := Call("__NAME___words", `{"text": "héllo world\nsecond line"}`)
	if err != nil {
		t.Fatal(err.Message)
	}
	var got map[string]int
	if e := json.Unmarshal([]byte(out), &got); e != nil {
		t.Fatal(e)
	}
	want := map[string]int{"lines": 2, "words": 4, "characters": 23, "bytes": 24}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d", k, got[k], v)
		}
	}
}

func TestErrors(t *testing.T) {
	if _, err := Call("__NAME___words", `{}`); err == nil || err.Kind != InvalidInput {
		t.Errorf("missing text: %v", err)
	}
	if _, err := Call("other", `{}`); err == nil || err.Kind != NotFound {
		t.Errorf("unknown tool: %v", err)
	}
}

func TestSchemaIsJSON(t *testing.T) {
	for _, s := range Specs() {
		if !json.Valid([]byte(s.InputSchema)) {
			t.Errorf("%s: schema is not JSON", s.Name)
		}
	}
}
