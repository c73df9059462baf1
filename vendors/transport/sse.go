package transport

// sseParser reads a server-sent event stream a chunk at a time without
// keeping it: the data lines of each event go straight into a jsonScan,
// and only the field name (at most maxField bytes) and the event name (at
// most maxType bytes) are kept. Memory stays the same whatever the length
// of the stream or of an event.
type sseParser struct {
	scan     *jsonScan
	field    [maxField]byte
	fieldLen int  // maxField+1 once too long
	inValue  bool // past the field name's colon
	skipSP   bool // the next byte is the optional space after the colon
	skipLF   bool // the previous byte was a CR ending a line
	dataSeen bool // the current event has a data line
	name     [maxType]byte
	nameLen  int
	// event is called at the end of every event that had data, with its
	// event field (empty when it had none, valid only during the call);
	// the event's data went to scan since the previous call.
	event func(name []byte)
}

const maxField = 8

var newline = [1]byte{'\n'}

// write parses p.
func (p *sseParser) write(b []byte) {
	for i := 0; i < len(b); i++ {
		c := b[i]
		if p.skipLF {
			p.skipLF = false
			if c == '\n' {
				continue
			}
		}
		if c == '\n' || c == '\r' {
			p.skipLF = c == '\r'
			p.endLine()
			continue
		}
		if !p.inValue {
			if c == ':' {
				p.inValue, p.skipSP = true, true
				p.startValue()
				continue
			}
			if p.fieldLen < maxField {
				p.field[p.fieldLen] = c
				p.fieldLen++
			} else {
				p.fieldLen = maxField + 1
			}
			continue
		}
		if p.skipSP {
			p.skipSP = false
			if c == ' ' {
				continue
			}
		}
		// Hand the rest of the line to the field in one go.
		j := i
		for j < len(b) && b[j] != '\n' && b[j] != '\r' {
			j++
		}
		p.value(b[i:j])
		i = j - 1
	}
}

func (p *sseParser) fieldIs(s string) bool {
	return p.fieldLen == len(s) && string(p.field[:p.fieldLen]) == s
}

// startValue runs when a field's colon is read.
func (p *sseParser) startValue() {
	if p.fieldIs("data") {
		if p.dataSeen {
			p.scan.write(newline[:])
		}
		p.dataSeen = true
	}
	if p.fieldIs("event") {
		p.nameLen = 0
	}
}

// value handles part of a field's value.
func (p *sseParser) value(v []byte) {
	switch {
	case p.fieldIs("data"):
		p.scan.write(v)
	case p.fieldIs("event"):
		n := copy(p.name[p.nameLen:], v)
		p.nameLen += n
	}
}

// endLine ends a line: an empty one dispatches the event.
func (p *sseParser) endLine() {
	empty := !p.inValue && p.fieldLen == 0
	if !p.inValue && p.fieldLen > 0 && p.fieldIs("data") {
		// "data" without a colon: an empty data line.
		p.startValue()
	}
	p.inValue, p.skipSP, p.fieldLen = false, false, 0
	if !empty {
		return
	}
	if p.dataSeen && p.event != nil {
		p.event(p.name[:p.nameLen])
	}
	p.dataSeen, p.nameLen = false, 0
	p.scan.reset()
}
