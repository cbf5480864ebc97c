// Package tools is the logic of the __NAME__ plugin. It knows nothing of
// WebAssembly, so `go test ./tools/` runs it natively.
package tools

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Kind is the kind of a failed call (a subset of the WIT error-kind).
type Kind int

const (
	InvalidInput Kind = iota // the model should change the arguments
	NotFound                 // no such tool
)

// Error is a failed call: the message is what the model reads.
type Error struct {
	Kind    Kind
	Message string
}

// Spec is one tool offered to the model.
type Spec struct {
	Name        string
	Description string
	InputSchema string // a JSON Schema object
}

// Specs lists the tools. Tool names must be unique among all loaded
// plugins: prefix them with the plugin's name.
func Specs() []Spec {
	return []Spec{{
		Name:        "__NAME___words",
		Description: "Count the lines, words, characters and bytes of a text. Returns JSON.",
		InputSchema: `{
  "type": "object",
  "properties": {
    "text": {"type": "string", "description": "The text to count.", "maxLength": 1000000}
  },
  "required": ["text"],
  "additionalProperties": false
}`,
	}}
}

// Call runs tool `name` with JSON `arguments` and returns the result text.
func Call(name, arguments string) (string, *Error) {
	if name != "__NAME___words" {
		return "", &Error{NotFound, fmt.Sprintf("this plugin has no tool %q", name)}
	}
	var args struct {
		Text *string `json:"text"`
	}
	if err := json.Unmarshal([]byte(arguments), &args); err != nil || args.Text == nil {
		return "", &Error{InvalidInput, `argument "text" is required: a string`}
	}
	text := *args.Text
	if !utf8.ValidString(text) {
		return "", &Error{InvalidInput, `argument "text" is not valid UTF-8`}
	}
	lines := strings.Count(text, "\n")
	if text != "" && !strings.HasSuffix(text, "\n") {
		lines++ // a last line without a newline still counts
	}
	out, _ := json.MarshalIndent(map[string]int{
		"lines":      lines,
		"words":      len(strings.Fields(text)),
		"characters": utf8.RuneCountInString(text),
		"bytes":      len(text),
	}, "", "  ")
	return string(out), nil
}
