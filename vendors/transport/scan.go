package transport

// jsonScan reads one JSON value a chunk at a time, in bounded memory, and
// picks out what settling a call needs: the value of a "usage" object at
// the top level or under a top-level "response" or "message" object (the
// places OpenAI, the Responses API and Anthropic put it, in JSON bodies and
// in stream events), the top-level "type" string, and the total length of
// the strings that hold generated text ("text", "content", "delta",
// "partial_json", "arguments", "thinking", "refusal"), for a stream cut
// short before its usage. It keeps no more than maxCapture bytes of a usage
// object and never fails: malformed input only makes it find less.
type jsonScan struct {
	depth  int                // open objects and arrays
	frames [maxFrames]frame   // the innermost maxFrames containers' state
	str    bool               // inside a string
	esc    bool               // the previous byte was a backslash in a string
	isKey  bool               // the string is an object key
	key    [maxKey]byte       // the key being read
	keyLen int                // its length; maxKey+1 once it is too long
	text   bool               // the string is generated text
	isType bool               // the string is the top-level "type"
	capAt  int                // depth at which a usage capture started; 0: none
	capBuf [maxCapture]byte   // the usage object being captured
	capLen int                // its length; -1 once it overflowed
	typ    [maxType]byte      // the top-level "type" value
	typLen int                //
	found  func(usage []byte) // called with each complete usage object
	// textBytes sums the lengths, in bytes as sent (escapes included), of
	// the generated-text strings seen.
	textBytes int64
}

const (
	maxFrames  = 4
	maxKey     = 16
	maxCapture = 4096
	maxType    = 64
)

// frame is an open container.
type frame struct {
	obj     bool // an object (else an array)
	wantKey bool // in an object, the next string is a key
	key     [maxKey]byte
	keyLen  int // maxKey+1 when the key was too long to keep
}

// reset prepares the scanner for a new value, keeping found.
func (s *jsonScan) reset() {
	found := s.found
	*s = jsonScan{found: found}
}

// typeName returns the top-level "type" string seen so far (at most
// maxType bytes), valid until the next write or reset.
func (s *jsonScan) typeName() []byte { return s.typ[:s.typLen] }

// write scans p.
func (s *jsonScan) write(p []byte) {
	for i := 0; i < len(p); i++ {
		if s.str && !s.esc && !s.isKey && !s.isType && s.capAt == 0 {
			// The bulk of a body: plain bytes inside a value string.
			j := i
			for j < len(p) && p[j] != '"' && p[j] != '\\' {
				j++
			}
			if s.text {
				s.textBytes += int64(j - i)
			}
			if i = j; i == len(p) {
				return
			}
		}
		c := p[i]
		if s.capAt > 0 && s.capLen >= 0 {
			if s.capLen < maxCapture {
				s.capBuf[s.capLen] = c
				s.capLen++
			} else {
				s.capLen = -1
			}
		}
		if s.str {
			s.inString(c)
			continue
		}
		s.structural(c)
	}
}

// inString handles a byte inside a string.
func (s *jsonScan) inString(c byte) {
	if s.esc {
		s.esc = false
		s.stringByte(c)
		return
	}
	switch c {
	case '\\':
		s.esc = true
		s.stringByte(c)
	case '"':
		s.str = false
		s.endString()
	default:
		s.stringByte(c)
	}
}

func (s *jsonScan) stringByte(c byte) {
	switch {
	case s.isKey:
		if s.keyLen < maxKey {
			s.key[s.keyLen] = c
			s.keyLen++
		} else {
			s.keyLen = maxKey + 1
		}
	case s.isType:
		if s.typLen < maxType {
			s.typ[s.typLen] = c
			s.typLen++
		}
	case s.text:
		s.textBytes++
	}
}

func (s *jsonScan) endString() {
	if s.isKey {
		if f := s.top(); f != nil {
			f.key, f.keyLen = s.key, s.keyLen
		}
		s.isKey = false
		return
	}
	s.isType, s.text = false, false
}

// structural handles a byte outside strings.
func (s *jsonScan) structural(c byte) {
	switch c {
	case ' ', '\t', '\n', '\r':
	case '"':
		s.str = true
		f := s.top()
		if f != nil && f.obj && f.wantKey {
			s.isKey, s.keyLen = true, 0
			return
		}
		s.isType = s.depth == 1 && s.keyIs(0, "type")
		s.text = f != nil && f.obj && isTextKey(f)
	case '{', '[':
		if c == '{' && s.capAt == 0 && s.usageHere() {
			s.capAt, s.capLen = s.depth+1, 1
			s.capBuf[0] = '{'
		}
		s.depth++
		if f := s.top(); f != nil {
			*f = frame{obj: c == '{', wantKey: c == '{'}
		}
	case '}', ']':
		if s.depth == 0 {
			return
		}
		if s.capAt == s.depth {
			if s.capLen > 0 && s.found != nil {
				s.found(s.capBuf[:s.capLen])
			}
			s.capAt, s.capLen = 0, 0
		}
		s.depth--
	case ',':
		if f := s.top(); f != nil && f.obj {
			f.wantKey = true
		}
	case ':':
		if f := s.top(); f != nil && f.obj {
			f.wantKey = false
		}
	}
}

// top returns the innermost open container's frame, or nil at the top
// level or deeper than maxFrames.
func (s *jsonScan) top() *frame {
	if s.depth < 1 || s.depth > maxFrames {
		return nil
	}
	return &s.frames[s.depth-1]
}

// keyIs reports whether the container at index i (0: the outermost) is an
// object whose current key is k.
func (s *jsonScan) keyIs(i int, k string) bool {
	if i >= s.depth || i >= maxFrames {
		return false
	}
	f := &s.frames[i]
	return f.obj && !f.wantKey && f.keyLen == len(k) && string(f.key[:f.keyLen]) == k
}

// usageHere reports whether a value starting now is at a usage path:
// usage, response.usage or message.usage.
func (s *jsonScan) usageHere() bool {
	switch s.depth {
	case 1:
		return s.keyIs(0, "usage")
	case 2:
		return (s.keyIs(0, "response") || s.keyIs(0, "message")) && s.keyIs(1, "usage")
	}
	return false
}

func isTextKey(f *frame) bool {
	if f.wantKey || f.keyLen > maxKey {
		return false
	}
	switch string(f.key[:f.keyLen]) {
	case "text", "content", "delta", "partial_json", "arguments", "thinking", "refusal":
		return true
	}
	return false
}
