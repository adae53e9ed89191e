package sluice

// The meter of an OpenAI-compatible upstream (OpenAI, vLLM, llama.cpp, LiteLLM, Ollama's /v1):
// the tokens a completion used are usage.total_tokens of its JSON answer, or of the last
// server-sent event carrying usage in a streamed one (stream_options.include_usage).

import (
	"bytes"
	"encoding/json"
	"net/http"
)

// maxMeteredJSON bounds the copy of a JSON answer a meter keeps to parse at the end (a
// completion's JSON is a few KiB); a longer answer is not charged. An event stream is parsed
// as it goes and keeps one event at a time, bounded the same way.
const maxMeteredJSON = 1 << 20

// OpenAIUsage is an Options.Charge for an OpenAI-compatible upstream: it charges
// usage.total_tokens of a JSON answer, or of the last `data:` event that carries usage in a
// streamed (text/event-stream) answer. An answer without usage charges nothing.
func OpenAIUsage(*http.Request) Meter { return &openAIMeter{} }

// openAIMeter tells the two kinds of answer apart by their first byte: a JSON answer starts
// with '{', an event stream with a field name or a comment.
type openAIMeter struct {
	mode  byte   // 0 not seen yet, 'j' JSON, 's' event stream
	body  []byte // JSON: the answer so far
	over  bool   // JSON: longer than maxMeteredJSON; event: this line is
	line  []byte // event stream: the line being read
	data  []byte // event stream: the data lines of the event being read
	total int64
	found bool
}

func (m *openAIMeter) Write(p []byte) (int, error) {
	n := len(p)
	if m.mode == 0 {
		p = bytes.TrimLeft(p, " \t\r\n")
		if len(p) == 0 {
			return n, nil
		}
		m.mode = 's'
		if p[0] == '{' {
			m.mode = 'j'
		}
	}
	if m.mode == 'j' {
		if len(m.body)+len(p) > maxMeteredJSON {
			m.over, m.body = true, nil
		}
		if !m.over {
			m.body = append(m.body, p...)
		}
		return n, nil
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			m.extendLine(p)
			break
		}
		m.extendLine(p[:i])
		m.endLine()
		p = p[i+1:]
	}
	return n, nil
}

func (m *openAIMeter) extendLine(p []byte) {
	if len(m.line)+len(p) > maxMeteredJSON {
		m.over, m.line = true, m.line[:0]
	}
	if !m.over {
		m.line = append(m.line, p...)
	}
}

// endLine handles one line of the event stream: a data field adds to the event, an empty
// line ends it; other fields and comments do not matter here.
func (m *openAIMeter) endLine() {
	line := bytes.TrimSuffix(m.line, []byte("\r"))
	over := m.over
	m.line, m.over = m.line[:0], false
	switch {
	case over:
	case len(line) == 0:
		m.endEvent()
	case bytes.HasPrefix(line, []byte("data:")):
		value := bytes.TrimPrefix(line[len("data:"):], []byte(" "))
		if len(m.data)+len(value)+1 > maxMeteredJSON {
			m.data = m.data[:0]
			return
		}
		if len(m.data) > 0 {
			m.data = append(m.data, '\n')
		}
		m.data = append(m.data, value...)
	}
}

func (m *openAIMeter) endEvent() {
	data := m.data
	m.data = m.data[:0]
	// Most events are token deltas: only one that names usage is parsed.
	if bytes.Contains(data, []byte(`"usage"`)) {
		if total, ok := totalTokens(data); ok {
			m.total, m.found = total, true
		}
	}
}

func (m *openAIMeter) Amount(int, http.Header) (int64, bool) {
	switch m.mode {
	case 'j':
		if m.over {
			return 0, false
		}
		return totalTokens(m.body)
	case 's':
		// A stream may end without the empty line after its last event.
		if len(m.line) > 0 {
			m.endLine()
		}
		if len(m.data) > 0 {
			m.endEvent()
		}
	}
	return m.total, m.found
}

// totalTokens reads usage.total_tokens of a completion (or a chunk of one).
func totalTokens(doc []byte) (int64, bool) {
	var v struct {
		Usage *struct {
			TotalTokens *int64 `json:"total_tokens"`
		} `json:"usage"`
	}
	if json.Unmarshal(doc, &v) != nil || v.Usage == nil || v.Usage.TotalTokens == nil {
		return 0, false
	}
	return *v.Usage.TotalTokens, true
}
