package vendors

// Admission returns what to acquire for c: one Charge per dimension of the
// profile, in the order of Dimensions, with its name and the vendor's
// admission charge (see CostModel.Admission). An output estimate
// (AdmitOutputEstimate) above the dimension's capacity is lowered to the
// capacity: the vendor only asks for a positive balance, so such an
// estimate must not make the request wait forever. Other charges are left
// as computed: one above capacity is refused by the store, as the vendor
// refuses a request larger than its limit.
func (p Profile) Admission(c Call) ([]Charge, error) {
	all, err := p.Cost.Admission(c)
	if err != nil {
		return nil, err
	}
	return p.attach(all, func(d Dimension, ch Charge) Charge {
		if p.admit(d.Metric) == AdmitOutputEstimate {
			ch.Amount = min(ch.Amount, d.Config.Capacity)
		}
		return ch
	}), nil
}

// Settle returns the totals to settle a lease's dimensions to once the
// response reports u: one Charge per dimension that settles, in the order
// of Dimensions. admitted is what Admission returned for the call.
func (p Profile) Settle(admitted []Charge, u Usage) ([]Charge, error) {
	all, err := p.Cost.Settle(admitted, u)
	if err != nil {
		return nil, err
	}
	return p.attach(all, nil), nil
}

// attach keeps the charges on metrics the profile has a dimension for,
// named, in the order of Dimensions.
func (p Profile) attach(all []Charge, fix func(Dimension, Charge) Charge) []Charge {
	out := make([]Charge, 0, len(p.Dimensions))
	for _, d := range p.Dimensions {
		for _, ch := range all {
			if ch.Metric != d.Metric {
				continue
			}
			ch.Dimension = d.Name
			if fix != nil {
				ch = fix(d, ch)
			}
			out = append(out, ch)
		}
	}
	return out
}

func (p Profile) admit(m Metric) AdmitRule {
	for _, mc := range p.Cost.Metrics {
		if mc.Metric == m {
			return mc.Admit
		}
	}
	return 0
}
