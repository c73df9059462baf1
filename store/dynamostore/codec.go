package dynamostore

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// Attribute names. The first block is the Python and TypeScript SDKs' schema, shared
// with the Python and TypeScript SDKs; the second holds what Sluice adds and
// the older SDKs ignore.
const (
	attrPK       = "vendor_dimension"
	attrCapacity = "capacity"
	attrTokens   = "tokens"
	attrRate     = "refill_rate"
	attrLast     = "last_refill_at"
	attrCost     = "cost_per_call"
	attrType     = "limit_type"
	attrVersion  = "version"

	attrAmount   = "refill_amount"     // exact refill: tokens per period
	attrPeriod   = "refill_period_ms"  // exact refill period, ms
	attrMaxDebt  = "max_debt"          // bucket.Config.MaxDebt as configured
	attrInc      = "incarnation"       // random id of this bucket's creation
	attrHolders  = "holders"           // map lease uuid → holder entry (see holder) of this bucket's lease records
	attrLastOp   = "last_op"           // token of the last acquisition that wrote the bucket
	attrUntil    = "cooldown_until_ms" // bucket.State.Until: a cooldown's end, Unix ms; absent means 0
	attrReserved = "reserved_until_ms" // bucket.State.Reserved: latest reservation's valid instant, Unix ms; absent means 0
	attrCharged  = "charged"           // bucket.State.Charged: the settlement counter, millitokens; absent means 0
	attrWaiters  = "waiters"           // map lease uuid → ticket (see ticketValue) of a concurrent bucket's waiter queue
	attrRenewals = "renewals"          // count of the ticket renewals written without the version (see queue.go)

	// Lease items (the SDKs' format), plus Sluice's extras.
	attrDimension = "dimension"
	attrLeaseCost = "cost"
	attrCreated   = "created_at"
	attrTTL       = "ttl"
	attrCaller    = "caller"
	attrLeaseID   = "lease_id"   // the lease's uuid
	attrDims      = "dims"       // every dimension of the lease, in request order
	attrExpiresMs = "expires_ms" // exact expiry, ms
	attrCreatedMs = "created_ms" // exact creation time, ms
	attrSlotCost  = "slot_cost"  // a concurrent item's cost (its cost attribute is 0: see leaseItemAttrs)
	attrValidMs   = "valid_ms"   // a reservation's valid instant, ms (absent on an acquisition's lease)

	// Keys of a holder entry written as a map (see holder).
	holderExp  = "e" // expiry, ms
	holderCost = "c" // cost in tokens, to restore without the lease item

	// Keys of a waiter's ticket (see ticketValue).
	ticketAt  = "a" // the decision time at which the ticket was first taken, ms
	ticketExp = "e" // the ticket's expiry, ms
	ticketCst = "c" // the waiter's cost on the bucket, tokens (absent: 1)
)

// holder is one entry of a bucket's holders map: a lease recorded on the
// bucket. On a concurrent bucket it is the map {"e": expiry ms, "c": cost},
// so that the reconciler can restore the slot when DynamoDB's TTL process
// has deleted the lease item; elsewhere, and in entries written before the
// cost was kept, it is the expiry alone (a number).
type holder struct {
	exp     int64
	cost    int64
	hasCost bool
}

// value encodes h for the holders map.
func (h holder) value() types.AttributeValue {
	if !h.hasCost {
		return numInt(h.exp)
	}
	return &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		holderExp: numInt(h.exp), holderCost: numInt(h.cost)}}
}

// decodeHolder reads a holder entry in either form.
func decodeHolder(v types.AttributeValue) (holder, bool) {
	switch x := v.(type) {
	case *types.AttributeValueMemberN:
		e, err := strconv.ParseInt(x.Value, 10, 64)
		return holder{exp: e}, err == nil
	case *types.AttributeValueMemberM:
		e, eok := getN(x.Value, holderExp)
		c, cok := getN(x.Value, holderCost)
		if !eok || !cok {
			return holder{}, false
		}
		h := holder{hasCost: true}
		var err1, err2 error
		h.exp, err1 = strconv.ParseInt(e, 10, 64)
		h.cost, err2 = strconv.ParseInt(c, 10, 64)
		return h, err1 == nil && err2 == nil
	}
	return holder{}, false
}

// formatMilli writes millitokens as a decimal with exactly three places:
// 47125 → "47.125", -1500 → "-1.500".
func formatMilli(m int64) string {
	sign := ""
	u := uint64(m)
	if m < 0 {
		sign, u = "-", uint64(-m)
	}
	return fmt.Sprintf("%s%d.%03d", sign, u/1000, u%1000)
}

// formatSeconds writes Unix milliseconds as seconds with three decimals.
func formatSeconds(ms int64) string { return formatMilli(ms) }

// parseMilli reads a decimal number as thousandths, rounding toward minus
// infinity when it has more than three decimals (values written by the
// Python and TypeScript SDKs, which store floats): never more tokens than written.
func parseMilli(s string) (int64, error) {
	return parseScaled(s, false)
}

// parseMilliCeil is parseMilli rounding up, for timestamps: a refill
// timestamp rounded up never credits time that was not written.
func parseMilliCeil(s string) (int64, error) {
	return parseScaled(s, true)
}

// maxExponent bounds the decimal exponent parseScaled accepts. DynamoDB
// numbers range from 1e-130 to 1e125; big.Rat's cost grows with the
// exponent, so that a far larger one is refused before it is expanded.
const maxExponent = 400

func parseScaled(s string, ceil bool) (int64, error) {
	s = strings.TrimSpace(s)
	if len(s) > 200 {
		return 0, fmt.Errorf("not a number: %d characters", len(s))
	}
	if i := strings.IndexAny(s, "eEpP"); i >= 0 {
		if e, err := strconv.Atoi(s[i+1:]); err != nil || e < -maxExponent || e > maxExponent {
			return 0, fmt.Errorf("not a number in range: %q", s)
		}
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return 0, fmt.Errorf("not a number: %q", s)
	}
	r.Mul(r, big.NewRat(1000, 1))
	q := new(big.Int).Quo(r.Num(), r.Denom()) // truncates toward zero
	rem := new(big.Int).Rem(r.Num(), r.Denom())
	if rem.Sign() != 0 {
		if ceil && r.Sign() > 0 {
			q.Add(q, big.NewInt(1))
		} else if !ceil && r.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		}
	}
	if !q.IsInt64() {
		return 0, fmt.Errorf("out of range: %q", s)
	}
	return q.Int64(), nil
}

// parseInt reads an integer attribute; a decimal is rounded up (costs and
// capacities written as floats by other SDKs).
func parseInt(s string) (int64, error) {
	m, err := parseMilliCeil(s)
	if err != nil {
		return 0, err
	}
	q := m / 1000
	if m%1000 > 0 {
		q++
	}
	return q, nil
}

// formatRate writes tokens per second as a decimal for the Python and TypeScript SDKs
// (amount tokens per periodMs), with at most six decimals.
func formatRate(amount, periodMs int64) string {
	if periodMs == 0 {
		return "0"
	}
	r := new(big.Rat).SetFrac(big.NewInt(amount*1000), big.NewInt(periodMs))
	s := r.FloatString(6)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// deriveRefill turns the SDKs' refill_rate (tokens per second, a decimal)
// into Sluice's exact fraction for items that lack refill_amount and
// refill_period_ms: amount = capacity per period = capacity/rate seconds,
// with the period rounded UP to whole milliseconds so that the derived rate
// never exceeds the decimal one (100 tokens at 1.667/s → 100 per 59989 ms).
// Periods beyond bucket.MaxPeriodMs keep the rate with a smaller amount;
// a rate below one token per 366 days is raised to that.
func deriveRefill(capacity int64, rate string) (amount, periodMs int64, err error) {
	r, ok := new(big.Rat).SetString(strings.TrimSpace(rate))
	if !ok || r.Sign() < 0 {
		return 0, 0, fmt.Errorf("refill_rate %q is not a non-negative number", rate)
	}
	if r.Sign() == 0 {
		return 0, 0, nil
	}
	// period_ms = ceil(capacity*1000/rate)
	p := new(big.Rat).Quo(new(big.Rat).SetInt64(capacity*1000), r)
	pi := new(big.Int).Quo(p.Num(), p.Denom())
	if new(big.Int).Rem(p.Num(), p.Denom()).Sign() != 0 {
		pi.Add(pi, big.NewInt(1))
	}
	if pi.IsInt64() && pi.Int64() <= bucket.MaxPeriodMs {
		return capacity, max(pi.Int64(), 1), nil
	}
	// Very slow: amount = floor(rate*MaxPeriodMs/1000) per MaxPeriodMs.
	a := new(big.Rat).Mul(r, big.NewRat(bucket.MaxPeriodMs, 1000))
	ai := new(big.Int).Quo(a.Num(), a.Denom())
	return max(ai.Int64(), 1), bucket.MaxPeriodMs, nil
}

func num(v string) types.AttributeValue   { return &types.AttributeValueMemberN{Value: v} }
func numInt(v int64) types.AttributeValue { return num(strconv.FormatInt(v, 10)) }
func str(v string) types.AttributeValue   { return &types.AttributeValueMemberS{Value: v} }
func key(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: str(pk)}
}

func getS(item map[string]types.AttributeValue, name string) (string, bool) {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value, true
	}
	return "", false
}

func getN(item map[string]types.AttributeValue, name string) (string, bool) {
	if v, ok := item[name].(*types.AttributeValueMemberN); ok {
		return v.Value, true
	}
	return "", false
}

// bucketItem is a decoded bucket row.
type bucketItem struct {
	b       store.Bucket
	lim     bucket.Limits
	st      bucket.State
	version int64
	inc     string // "" when the row was written by another SDK
	holders map[string]holder
	hasMap  bool // the holders attribute exists
	lastOp  string
	rawTok  string // tokens exactly as stored, for conditions (see versionCond)
	// waiters is a concurrent bucket's waiter queue, live and dead
	// tickets, by lease uuid (see queue.go).
	waiters map[string]store.Ticket
	// renewals counts the tickets renewed in place (see renewInPlace).
	renewals int64
}

// decodeBucket reads a bucket row written by Sluice or by the Python and TypeScript SDKs.
func decodeBucket(item map[string]types.AttributeValue) (*bucketItem, error) {
	name, _ := getS(item, attrPK)
	bad := func(attr string, err error) error {
		return fmt.Errorf("dynamostore: bucket %q: attribute %s: %w", name, attr, err)
	}
	need := func(attr string) (string, error) {
		v, ok := getN(item, attr)
		if !ok {
			return "", bad(attr, fmt.Errorf("missing or not a number"))
		}
		return v, nil
	}
	bi := &bucketItem{b: store.Bucket{Name: name}}
	typ, _ := getS(item, attrType)
	t, err := bucket.ParseType(typ)
	if err != nil {
		return nil, bad(attrType, err)
	}
	bi.b.Type = t
	v, err := need(attrCapacity)
	if err != nil {
		return nil, err
	}
	if bi.b.Capacity, err = parseInt(v); err != nil {
		return nil, bad(attrCapacity, err)
	}
	if v, ok := getN(item, attrCost); ok {
		if bi.b.CostPerCall, err = parseInt(v); err != nil {
			return nil, bad(attrCost, err)
		}
		if bi.b.CostPerCall == 1 {
			bi.b.CostPerCall = 0 // the default; keeps Config comparable
		}
	}
	if v, ok := getN(item, attrMaxDebt); ok {
		if bi.b.MaxDebt, err = parseInt(v); err != nil {
			return nil, bad(attrMaxDebt, err)
		}
	}
	if t != bucket.Concurrent {
		av, aok := getN(item, attrAmount)
		pv, pok := getN(item, attrPeriod)
		if aok && pok {
			if bi.b.RefillAmount, err = parseInt(av); err != nil {
				return nil, bad(attrAmount, err)
			}
			p, err := parseInt(pv)
			if err != nil {
				return nil, bad(attrPeriod, err)
			}
			bi.b.RefillPeriod = msDur(p)
		} else {
			rv, err := need(attrRate)
			if err != nil {
				return nil, err
			}
			a, p, err := deriveRefill(bi.b.Capacity, rv)
			if err != nil {
				return nil, bad(attrRate, err)
			}
			bi.b.RefillAmount, bi.b.RefillPeriod = a, msDur(p)
		}
	}
	if err := bi.b.Config.Validate(); err != nil {
		return nil, fmt.Errorf("dynamostore: bucket %q: %w", name, err)
	}
	bi.lim = bi.b.Config.Limits()
	if v, err = need(attrTokens); err != nil {
		return nil, err
	}
	bi.rawTok = v
	if bi.st.Tokens, err = parseMilli(v); err != nil {
		return nil, bad(attrTokens, err)
	}
	if v, err = need(attrLast); err != nil {
		return nil, err
	}
	if bi.st.Last, err = parseMilliCeil(v); err != nil {
		return nil, bad(attrLast, err)
	}
	if v, ok := getN(item, attrUntil); ok {
		if bi.st.Until, err = parseUntil(v); err != nil {
			return nil, bad(attrUntil, err)
		}
	}
	if v, ok := getN(item, attrReserved); ok {
		if bi.st.Reserved, err = parseUntil(v); err != nil {
			return nil, bad(attrReserved, err)
		}
	}
	if v, ok := getN(item, attrCharged); ok {
		if bi.st.Charged, err = parseCharged(v); err != nil {
			return nil, bad(attrCharged, err)
		}
	}
	if m, ok := item[attrWaiters].(*types.AttributeValueMemberM); ok {
		bi.waiters = decodeWaiters(m.Value)
	}
	if v, ok := getN(item, attrVersion); ok {
		if bi.version, err = parseInt(v); err != nil {
			return nil, bad(attrVersion, err)
		}
	}
	if v, ok := getN(item, attrRenewals); ok {
		if bi.renewals, err = parseInt(v); err != nil {
			return nil, bad(attrRenewals, err)
		}
	}
	bi.inc, _ = getS(item, attrInc)
	bi.lastOp, _ = getS(item, attrLastOp)
	if m, ok := item[attrHolders].(*types.AttributeValueMemberM); ok {
		bi.hasMap = true
		bi.holders = make(map[string]holder, len(m.Value))
		for id, x := range m.Value {
			if h, ok := decodeHolder(x); ok {
				bi.holders[id] = h
			}
		}
	}
	return bi, nil
}

// encodeBucket returns the full row for b in state st.
func encodeBucket(b store.Bucket, st bucket.State, version int64, inc string, holders map[string]holder) map[string]types.AttributeValue {
	cost := b.Config.Cost()
	hm := make(map[string]types.AttributeValue, len(holders))
	for id, h := range holders {
		hm[id] = h.value()
	}
	item := map[string]types.AttributeValue{
		attrPK:       str(b.Name),
		attrCapacity: numInt(b.Capacity),
		attrTokens:   num(formatMilli(st.Tokens)),
		attrRate:     num(formatRate(b.RefillAmount, b.RefillPeriod.Milliseconds())),
		attrLast:     num(formatSeconds(st.Last)),
		attrCost:     numInt(cost),
		attrType:     str(b.Type.String()),
		attrVersion:  numInt(version),
		attrAmount:   numInt(b.RefillAmount),
		attrPeriod:   numInt(b.RefillPeriod.Milliseconds()),
		attrMaxDebt:  numInt(b.MaxDebt),
		attrHolders:  &types.AttributeValueMemberM{Value: hm},
	}
	if inc != "" {
		item[attrInc] = str(inc)
	}
	if st.Until != 0 {
		item[attrUntil] = numInt(st.Until)
	}
	if st.Reserved != 0 {
		item[attrReserved] = numInt(st.Reserved)
	}
	if st.Charged != 0 {
		item[attrCharged] = numInt(st.Charged)
	}
	return item
}

// parseCharged reads the settlement counter: an integer number of
// millitokens, brought into its range (bucket.WrapCharged).
func parseCharged(v string) (int64, error) {
	c, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer", v)
	}
	return bucket.WrapCharged(c), nil
}

// parseUntil reads cooldown_until_ms and reserved_until_ms: Unix
// milliseconds, 0 to bucket.MaxTimeMs. A decimal (never written by Sluice)
// is rounded up, so that a cooldown never ends early and a reservation's
// debt is never forgiven early.
func parseUntil(s string) (int64, error) {
	v, err := parseInt(s)
	if err != nil {
		return 0, err
	}
	if v < 0 || v > bucket.MaxTimeMs {
		return 0, fmt.Errorf("%s is outside 0..%d ms", s, int64(bucket.MaxTimeMs))
	}
	return v, nil
}

// earliest returns the earliest holder expiry, or 0.
func (bi *bucketItem) earliest() int64 {
	var m int64
	for _, h := range bi.holders {
		if m == 0 || h.exp < m {
			m = h.exp
		}
	}
	return m
}

// leasePK is a lease item's key: lease#{dimension}#{uuid}.
func leasePK(dim string, id store.LeaseID) string {
	return store.LeasePrefix + dim + "#" + id.String()
}

// parseLeasePK splits a lease key into its dimension and uuid.
func parseLeasePK(pk string) (dim, uuid string, ok bool) {
	rest, ok := strings.CutPrefix(pk, store.LeasePrefix)
	if !ok {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, '#')
	if i < 0 {
		return "", "", false
	}
	return rest[:i], rest[i+1:], true
}
