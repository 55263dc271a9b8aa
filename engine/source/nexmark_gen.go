package source

import (
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/internal/box"
)

// The Nexmark generator's rules, as Apache Beam's and Flink's reference
// generators define them (GeneratorConfig, PersonGenerator,
// AuctionGenerator, BidGenerator, PriceGenerator, StringsGenerator), with
// their default configuration. Event n is a person when n mod 50 is 0, an
// auction when it is 1 to 3, else a bid. Person and auction ids count those
// events from 1000. Bids go to a hot auction (the first of the newest
// hundred) with probability 1/2, else to one of the 100 newest auctions or
// the next 10; bidders are hot (the second of the newest hundred people)
// with probability 3/4, else one of the 1000 newest people or the next 10.
// Sellers are hot with probability 3/4. Prices are 10^(6u) dollars in cents
// for u uniform in [0, 1) (nextPrice). Each event draws from its own random stream,
// seeded by the seed and the event number, so any range can be generated
// alone.
//
// Two departures, neither visible to the queries: the random streams are
// splitmix64, not java.util.Random, so the values differ from Beam's for
// the same event; and the extra column (padding to Nexmark's average event
// size: 100 bytes a bid, 500 an auction, 200 a person) is a slice of a
// random text made once per seed instead of new letters per event, which
// costs no copy. Flink's bid channel and url are deterministic here (Flink
// draws the urls from an unseeded random).
const (
	nexmarkPersonShare  = 1
	nexmarkAuctionShare = 3
	nexmarkShares       = 50 // person + auction + bid (46)

	firstPersonID   = 1000
	firstAuctionID  = 1000
	firstCategoryID = 10
	numCategories   = 5

	numActivePeople    = 1000
	numInFlightAuction = 100
	personIDLead       = 10
	auctionIDLead      = 10
	hotGroup           = 100 // hot auctions, sellers and bidders are the first of groups of 100
	hotAuctionRatio    = 2
	hotSellersRatio    = 4
	hotBiddersRatio    = 4

	avgPersonBytes  = 200
	avgAuctionBytes = 500
	avgBidBytes     = 100

	hotChannelsRatio = 2
	numChannels      = 10_000

	extraTextBytes = 1 << 16
)

var (
	hotChannels = []string{"Google", "Facebook", "Baidu", "Apple"}
	usStates    = []string{"AZ", "CA", "ID", "OR", "WA", "WY"}
	usCities    = []string{"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"}
	firstNames  = []string{"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"}
	lastNames   = []string{"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"}
)

// eventKind is the kind of event n: 0 person, 1 auction, 2 bid.
func eventKind(n int64) int {
	switch r := n % nexmarkShares; {
	case r < nexmarkPersonShare:
		return 0
	case r < nexmarkPersonShare+nexmarkAuctionShare:
		return 1
	}
	return 2
}

func tableKind(t v1.NexmarkTable) int {
	switch t {
	case v1.NexmarkPerson:
		return 0
	case v1.NexmarkAuction:
		return 1
	}
	return 2
}

// countKind counts the events of table t among [from, to).
func countKind(t v1.NexmarkTable, from, to int64) int64 {
	return kindsBefore(t, to) - kindsBefore(t, from)
}

// kindsBefore counts the events of table t among [0, n).
func kindsBefore(t v1.NexmarkTable, n int64) int64 {
	lo, hi := int64(0), int64(nexmarkPersonShare) // person: offsets [0, 1) of each 50
	switch tableKind(t) {
	case 1:
		lo, hi = nexmarkPersonShare, nexmarkPersonShare+nexmarkAuctionShare
	case 2:
		lo, hi = nexmarkPersonShare+nexmarkAuctionShare, nexmarkShares
	}
	epochs, rest := n/nexmarkShares, n%nexmarkShares
	return epochs*(hi-lo) + min(max(rest-lo, 0), hi-lo)
}

// lastPerson is the newest person id (base 0) at event n: the person of n
// itself when n is a person.
func lastPerson(n int64) int64 { return n / nexmarkShares }

// lastAuction is the newest auction id (base 0) at event n.
func lastAuction(n int64) int64 {
	epoch, off := n/nexmarkShares, n%nexmarkShares
	switch {
	case off < nexmarkPersonShare:
		epoch, off = epoch-1, nexmarkAuctionShare-1
	case off >= nexmarkPersonShare+nexmarkAuctionShare:
		off = nexmarkAuctionShare - 1
	default:
		off -= nexmarkPersonShare
	}
	return epoch*nexmarkAuctionShare + off
}

// nextPerson picks a person among the active ones, or a few ahead.
func nextPerson(n int64, r *rng) int64 {
	people := lastPerson(n) + 1
	active := min(people, numActivePeople)
	return people - active + r.intn(active+personIDLead)
}

// nextAuction picks an auction among those likely in flight, or a few ahead.
func nextAuction(n int64, r *rng) int64 {
	newest := lastAuction(n)
	oldest := max(newest-numInFlightAuction, 0)
	return oldest + r.intn(newest-oldest+1+auctionIDLead)
}

// timeline stamps events: event n at baseMs + (n-baseEvent)·1000/perSecond.
type timeline struct {
	baseEvent, baseMs, perSecond int64
}

func (t timeline) ms(n int64) int64 {
	return t.baseMs + (n-t.baseEvent)*1000/t.perSecond
}

// rng is splitmix64: tiny, fast, and good enough for synthetic data.
type rng struct{ s uint64 }

func eventRNG(seed, n int64) rng {
	return rng{s: uint64(seed)*0x9E3779B97F4A7C15 ^ uint64(n)*0xD1B54A32D192ED03}
}

func (r *rng) next() uint64 {
	r.s += 0x9E3779B97F4A7C15
	z := r.s
	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
	z = (z ^ z>>27) * 0x94D049BB133111EB
	return z ^ z>>31
}

// intn returns a number in [0, n), n > 0.
func (r *rng) intn(n int64) int64 {
	hi, _ := bits.Mul64(r.next(), uint64(n))
	return int64(hi)
}

// word returns a random string of 3 to maxLen-1 letters with a space
// (given) instead of a letter one time in 13, trimmed (Nexmark's nextString).
func (r *rng) word(maxLen int64, space byte) string {
	n := 3 + r.intn(maxLen-3)
	b := make([]byte, n)
	for i := range b {
		if r.intn(13) == 0 {
			b[i] = space
		} else {
			b[i] = byte('a' + r.intn(26))
		}
	}
	return strings.TrimSpace(string(b))
}

// nexmarkGen makes the rows of one seed. Values that repeat (channels,
// urls, the hot ids, a millisecond's timestamp) are boxed once and shared:
// rows are never modified, and a boxed int64 or time.Time is an allocation.
type nexmarkGen struct {
	seed     int64
	text     string // extraTextBytes random letters
	channels []any  // numChannels, then the hot ones
	urls     []any
}

func newNexmarkGen(seed int64) *nexmarkGen {
	g := &nexmarkGen{seed: seed}
	r := eventRNG(seed, -1)
	b := make([]byte, extraTextBytes)
	for i := range b {
		b[i] = byte('a' + r.intn(26))
	}
	g.text = string(b)
	baseURL := func() string {
		return "https://www.nexmark.com/" + r.word(5, '_') + "/" + r.word(5, '_') + "/" + r.word(5, '_') + "/item.htm?query=1"
	}
	g.channels = make([]any, 0, numChannels+len(hotChannels))
	g.urls = make([]any, 0, numChannels+len(hotChannels))
	for c := range numChannels {
		url := baseURL()
		if r.intn(10) > 0 {
			url += "&channel_id=" + strconv.FormatInt(int64(bits.Reverse32(uint32(c))&math.MaxInt32), 10)
		}
		g.channels = append(g.channels, "channel-"+strconv.Itoa(c))
		g.urls = append(g.urls, url)
	}
	for _, c := range hotChannels {
		g.channels = append(g.channels, c)
		g.urls = append(g.urls, baseURL())
	}
	return g
}

// extra returns padding such that size plus its length is avg on average
// (Nexmark's nextExtra: uniform within ±20% of the missing bytes).
func (g *nexmarkGen) extra(r *rng, size, avg int64) string {
	if size > avg {
		return ""
	}
	want := avg - size
	delta := int64(math.Round(float64(want) * 0.2))
	n := want - delta
	if delta > 0 {
		n += r.intn(2 * delta)
	}
	at := r.intn(int64(len(g.text)) - n)
	return g.text[at : at+n]
}

// boxes caches the boxed value of the last time and ids seen, and boxes the
// values that do not repeat (a bid's price, a cold id, its extra) from slab,
// a few hundred at a time.
type boxes struct {
	ms     int64
	t      any
	ids    [2]int64
	idVals [2]any
	slab   box.Slab
}

func (b *boxes) time(ms int64) any {
	if b.t == nil || ms != b.ms {
		b.ms, b.t = ms, time.UnixMilli(ms).UTC()
	}
	return b.t
}

func (b *boxes) id(slot int, v int64) any {
	if b.idVals[slot] == nil || b.ids[slot] != v {
		b.ids[slot], b.idVals[slot] = v, v
	}
	return b.idVals[slot]
}

// rows returns the rows of the events of table t among [from, to).
func (g *nexmarkGen) rows(t v1.NexmarkTable, from, to int64, tl timeline) []engine.Row {
	k := countKind(t, from, to)
	if k == 0 {
		return nil
	}
	width := int64(len(v1.NexmarkColumns(t)))
	rows := make([]engine.Row, 0, k)
	vals := make([]any, k*width) // one allocation for every row
	kind := tableKind(t)
	var bx boxes
	for n := from; n < to; n++ {
		if eventKind(n) != kind {
			continue
		}
		i := int64(len(rows))
		row := engine.Row(vals[i*width : (i+1)*width : (i+1)*width])
		r := eventRNG(g.seed, n)
		switch kind {
		case 2:
			g.bid(row, n, &r, tl, &bx)
		case 1:
			g.auction(row, n, &r, tl, &bx)
		default:
			g.person(row, n, &r, tl, &bx)
		}
		rows = append(rows, row)
	}
	return rows
}

// bid fills auction, bidder, price, channel, url, dateTime, extra.
func (g *nexmarkGen) bid(row engine.Row, n int64, r *rng, tl timeline, bx *boxes) {
	if r.intn(hotAuctionRatio) > 0 {
		row[0] = bx.id(0, lastAuction(n)/hotGroup*hotGroup+firstAuctionID)
	} else {
		row[0] = bx.slab.Int64(nextAuction(n, r) + firstAuctionID)
	}
	if r.intn(hotBiddersRatio) > 0 {
		row[1] = bx.id(1, lastPerson(n)/hotGroup*hotGroup+1+firstPersonID)
	} else {
		row[1] = bx.slab.Int64(nextPerson(n, r) + firstPersonID)
	}
	row[2] = bx.slab.Int64(nextPrice(r))
	c := numChannels + r.intn(int64(len(hotChannels)))
	if r.intn(hotChannelsRatio) == 0 {
		c = r.intn(numChannels)
	}
	row[3], row[4] = g.channels[c], g.urls[c]
	row[5] = bx.time(tl.ms(n))
	row[6] = bx.slab.String(g.extra(r, 8+8+8+8, avgBidBytes))
}

// auction fills id, itemName, description, initialBid, reserve, dateTime,
// expires, seller, category, extra.
func (g *nexmarkGen) auction(row engine.Row, n int64, r *rng, tl timeline, bx *boxes) {
	ms := tl.ms(n)
	seller := nextPerson(n, r)
	if r.intn(hotSellersRatio) > 0 {
		seller = lastPerson(n) / hotGroup * hotGroup
	}
	initial := nextPrice(r)
	// An auction lasts, on average, until numInFlightAuction auctions later.
	horizon := tl.ms(n+numInFlightAuction*nexmarkShares/nexmarkAuctionShare) - ms
	expires := ms + 1 + r.intn(max(2*horizon, 1))
	name, desc := r.word(20, ' '), r.word(100, ' ')
	row[0] = lastAuction(n) + firstAuctionID
	row[1], row[2] = name, desc
	row[3], row[4] = initial, initial+nextPrice(r)
	row[5] = bx.time(ms)
	row[6] = time.UnixMilli(expires).UTC()
	row[7] = seller + firstPersonID
	row[8] = firstCategoryID + r.intn(numCategories)
	row[9] = g.extra(r, int64(8+len(name)+len(desc)+8+8+8+8+8), avgAuctionBytes)
}

// person fills id, name, emailAddress, creditCard, city, state, dateTime,
// extra.
func (g *nexmarkGen) person(row engine.Row, n int64, r *rng, tl timeline, bx *boxes) {
	name := firstNames[r.intn(int64(len(firstNames)))] + " " + lastNames[r.intn(int64(len(lastNames)))]
	email := r.word(7, ' ') + "@" + r.word(5, ' ') + ".com"
	var card strings.Builder
	for i := range 4 {
		if i > 0 {
			card.WriteByte(' ')
		}
		d := strconv.FormatInt(r.intn(10000), 10)
		card.WriteString(strings.Repeat("0", 4-len(d)) + d)
	}
	city := usCities[r.intn(int64(len(usCities)))]
	state := usStates[r.intn(int64(len(usStates)))]
	row[0] = lastPerson(n) + firstPersonID
	row[1], row[2], row[3], row[4], row[5] = name, email, card.String(), city, state
	row[6] = bx.time(tl.ms(n))
	row[7] = g.extra(r, int64(8+len(name)+len(email)+card.Len()+len(city)+len(state)), avgPersonBytes)
}
