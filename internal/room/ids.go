package room

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"

	"github.com/google/uuid"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/room/roomrule"
)

// EntryID is the public id of user's entry in a room whose secret is
// secret: an HMAC of the user id, so it is the same on every join and
// unguessable without the secret.
func EntryID(secret, user string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(user))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// A ticket's event stream needs no header (an EventSource cannot send
// one): its URL carries the user id and a MAC of it under the room's
// secret, so only the ticket's owner has it.

// streamURL is the relative URL of user u's ticket stream.
func streamURL(sku string, u uuid.UUID, room *inventory.LiveRoom) string {
	return "/api/v1/products/" + sku + "/queue/events/" + hex.EncodeToString(u[:]) + streamMAC(room.Secret, u)
}

func streamMAC(secret string, u uuid.UUID) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("events:" + u.String()))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// idsOf returns user u's derived ids in sku's live round.
func (s *Service) idsOf(sku string, live inventory.LiveRound, u uuid.UUID) derivedIDs {
	k := idsKey{sku: sku, round: live.Round, user: u}
	if d, ok := s.state.derived(k); ok {
		return d
	}
	id := EntryID(live.Room.Secret, u.String())
	key := roomrule.OrderKey(live.Room.Seed, id)
	d := derivedIDs{entryID: id, prefix: string(key[:]) + string(u[:]), eventsURL: streamURL(sku, u, live.Room),
		at: place{rank: -1}}
	s.state.keepDerived(k, d)
	return d
}

// placed keeps p as user u's place in sku's live round: an early one
// before the shuffle (rank -1) until its rank is known, then the final
// one; and pass once it is known.
func (s *Service) placed(sku string, live inventory.LiveRound, u uuid.UUID, p place, pass passInfo) {
	if p.rank < 0 && !p.early {
		return
	}
	s.state.place(idsKey{sku: sku, round: live.Round, user: u}, p, pass)
}
