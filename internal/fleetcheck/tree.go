package fleetcheck

// tree is a segment tree over window starts with range add on a prefix and
// prefix maximum with its position.
type tree struct {
	n    int
	mx   []int64
	at   []int
	lazy []int64
}

func newTree(starts []int64, amount int64) *tree {
	t := &tree{n: len(starts), mx: make([]int64, 4*len(starts)), at: make([]int, 4*len(starts)), lazy: make([]int64, 4*len(starts))}
	t.build(1, 0, t.n-1, starts, amount)
	return t
}

func (t *tree) build(node, l, r int, starts []int64, amount int64) {
	if l == r {
		t.mx[node], t.at[node] = amount*starts[l], l
		return
	}
	m := (l + r) / 2
	t.build(2*node, l, m, starts, amount)
	t.build(2*node+1, m+1, r, starts, amount)
	t.pull(node)
}

func (t *tree) pull(node int) {
	a, b := 2*node, 2*node+1
	if t.mx[b] > t.mx[a] {
		t.mx[node], t.at[node] = t.mx[b]+t.lazy[node], t.at[b]
	} else {
		t.mx[node], t.at[node] = t.mx[a]+t.lazy[node], t.at[a]
	}
}

// add adds v to starts 0..hi.
func (t *tree) add(hi int, v int64) {
	if hi >= 0 {
		t.addRange(1, 0, t.n-1, hi, v)
	}
}

func (t *tree) addRange(node, l, r, hi int, v int64) {
	if l > hi {
		return
	}
	if r <= hi {
		t.mx[node] += v
		t.lazy[node] += v
		return
	}
	m := (l + r) / 2
	t.addRange(2*node, l, m, hi, v)
	t.addRange(2*node+1, m+1, r, hi, v)
	t.pull(node)
}

// max returns the maximum over starts 0..hi and its index.
func (t *tree) max(hi int) (int64, int) {
	v, at, _ := t.query(1, 0, t.n-1, hi)
	return v, at
}

func (t *tree) query(node, l, r, hi int) (int64, int, bool) {
	if l > hi {
		return 0, 0, false
	}
	if r <= hi {
		return t.mx[node], t.at[node], true
	}
	m := (l + r) / 2
	v1, a1, ok1 := t.query(2*node, l, m, hi)
	v2, a2, ok2 := t.query(2*node+1, m+1, r, hi)
	switch {
	case ok1 && (!ok2 || v1 >= v2):
		return v1 + t.lazy[node], a1, true
	case ok2:
		return v2 + t.lazy[node], a2, true
	}
	return 0, 0, false
}
