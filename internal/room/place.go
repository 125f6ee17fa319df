package room

// place is an entry's place: early or late, when it joined, and its rank
// in admission order from 0 (-1 before the shuffle); final once rank is
// known.
type place struct {
	early    bool
	joinedMs int64
	rank     int64
}

// passInfo is an admitted entry's pass as the pass hash holds it ("": none).
type passInfo struct {
	pass, round string
	expires     int64
}

// shared is the room's state a ticket is read against: early entries,
// admitted so far, units available, Redis's clock (ms).
type shared struct{ early, admitted, available, now int64 }
