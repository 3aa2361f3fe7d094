package ops

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"fngateway/core"
	"fngateway/core/async"
)

// deadLettersUsage is printed by `gateway deadletters -h` and above a
// usage error.
const deadLettersUsage = `usage:
  gateway deadletters list [--json] [--dlq URL]
  gateway deadletters show [--json] [--dlq URL] <id>
  gateway deadletters redrive [--dry-run] [--dlq URL] [<id>...]
  gateway deadletters purge [--dry-run] [--force] [--min-age D] [--dlq URL] [<id>...]

Lists, shows and sends back the continuations the async queue set aside:
the SQS dead-letter queue (AsyncStore=s3://, found from AsyncQueue's
RedrivePolicy unless --dlq names it), the Azure poison queue
(AsyncStore=azure: <AsyncQueue>-poison) or the file store's quarantine/
(AsyncStore=file:<dir>). It reads the gateway's settings (AsyncStore,
AsyncQueue, AzureWebJobsStorage and its __ forms, the AWS_* variables).

An <id> is a request id (32 lowercase hex digits) or, for a message that
names no request, its message id (a UUID, or <32 hex digits>.msg in the
file store). redrive without ids takes every dead letter: a request that
can still finish is sent back to the continuation queue; one already
finished is acknowledged (its dead letters deleted, nothing sent); one past
its expiry, unknown to the store, or unreadable is reported and left.
purge without ids takes every dead letter and deletes it for good; it
refuses one younger than --min-age (default 1h) and one whose request can
still finish (redrive it instead), unless --force, which ends such a
request as Failed before its dead letter goes. With --dry-run nothing
changes.
`

// dlCommand is a parsed `gateway deadletters` command line.
type dlCommand struct {
	// Verb is list, show or redrive.
	Verb string
	// IDs are the ids given (show: exactly one).
	IDs []string
	// DryRun (redrive) changes nothing; JSON (list, show) prints JSON.
	DryRun, JSON bool
	// DLQ is the SQS dead-letter queue's URL, "" to find it.
	DLQ string
	// Force and MinAge (purge): purge what is younger than MinAge, or
	// can still finish, too.
	Force  bool
	MinAge time.Duration
}

// errUsage is wrapped by parseDeadLetters's errors: the command line is
// wrong (exit code 2).
var errUsage = errors.New("usage")

// parseDeadLetters parses the arguments after `gateway deadletters`;
// checkDLQ checks a --dlq value.
func parseDeadLetters(args []string, checkDLQ func(string) error) (dlCommand, error) {
	var c dlCommand
	if len(args) == 0 {
		return c, fmt.Errorf("%w: want a subcommand: list, show, redrive or purge", errUsage)
	}
	c.Verb = args[0]
	switch c.Verb {
	case "list", "show", "redrive", "purge":
	case "-h", "--help", "help":
		return dlCommand{Verb: "help"}, nil
	default:
		return c, fmt.Errorf("%w: unknown subcommand %.60q: want list, show, redrive or purge", errUsage, c.Verb)
	}
	fs := flag.NewFlagSet("deadletters "+c.Verb, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.DLQ, "dlq", "", "the SQS dead-letter queue URL")
	switch c.Verb {
	case "purge":
		purgeFlags(fs, &c)
		fallthrough
	case "redrive":
		fs.BoolVar(&c.DryRun, "dry-run", false, "change nothing")
	default:
		fs.BoolVar(&c.JSON, "json", false, "print JSON")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return c, fmt.Errorf("%w: deadletters %s: %v", errUsage, c.Verb, err)
	}
	if c.DLQ != "" {
		if err := checkDLQ(c.DLQ); err != nil {
			return c, fmt.Errorf("%w: --dlq %.200q: %v", errUsage, c.DLQ, err)
		}
	}
	c.IDs = fs.Args()
	for _, id := range c.IDs {
		if strings.HasPrefix(id, "-") {
			return c, fmt.Errorf("%w: %.60q: flags go before the ids", errUsage, id)
		}
		if !validLetterID(id) {
			return c, fmt.Errorf("%w: id %.60q: want a request id (32 lowercase hex digits) or a message id (a UUID, or <32 hex digits>.msg)", errUsage, id)
		}
	}
	switch {
	case c.Verb == "show" && len(c.IDs) != 1:
		return c, fmt.Errorf("%w: deadletters show: want exactly one id, got %d", errUsage, len(c.IDs))
	case c.Verb == "list" && len(c.IDs) != 0:
		return c, fmt.Errorf("%w: deadletters list takes no id (got %.60q); use show <id>", errUsage, c.IDs[0])
	}
	return c, nil
}

// validLetterID reports whether s can name a dead letter: a request id
// (32 lowercase hex digits), a UUID (SQS and Azure message ids, any case)
// or a file store message file name (<32 hex digits>.msg).
func validLetterID(s string) bool {
	hex := func(s string, upper bool) bool {
		for i := 0; i < len(s); i++ {
			c := s[i]
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || upper && c >= 'A' && c <= 'F') {
				return false
			}
		}
		return true
	}
	if base, ok := strings.CutSuffix(s, ".msg"); ok {
		return len(base) == 32 && hex(base, false)
	}
	if len(s) == 32 {
		return hex(s, false)
	}
	p := strings.Split(s, "-")
	if len(p) != 5 {
		return false
	}
	for i, n := range []int{8, 4, 4, 4, 12} {
		if len(p[i]) != n || !hex(p[i], true) {
			return false
		}
	}
	return true
}

// Letters connects the dead letters the gateway's settings name. The
// binary implements it over the stores it opens for serving, each cloud's
// only in a build that links that cloud (docs/development.md: build tags).
type Letters interface {
	// CheckDLQ checks a --dlq value, an SQS queue URL.
	CheckDLQ(url string) error
	// Open connects the store, the continuation queue and its dead letters
	// (with AsyncStore=s3://, the dead-letter queue dlq, by default the
	// queue's redrive policy's), and says where the dead letters are.
	Open(ctx context.Context, dlq string) (*async.Redriver, string, error)
}

// DeadLetters is `gateway deadletters …` over the dead letters letters
// opens, at now; it returns the exit code: 0, 1 when a dead letter could
// not be read, sent or deleted, 2 for a bad command line or setting.
func DeadLetters(ctx context.Context, args []string, letters Letters, now time.Time, stdout, stderr io.Writer) int {
	c, err := parseDeadLetters(args, letters.CheckDLQ)
	if c.Verb == "help" {
		fmt.Fprint(stdout, deadLettersUsage)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "gateway deadletters: %v\n\n%s", err, deadLettersUsage)
		return 2
	}
	r, where, err := letters.Open(ctx, c.DLQ)
	if err != nil {
		return ExitCode(stderr, err)
	}
	switch c.Verb {
	case "list", "show":
		letters, err := r.List(ctx, now)
		if err != nil {
			return ExitCode(stderr, err)
		}
		if c.Verb == "show" {
			l, ok := findLetter(letters, c.IDs[0])
			if !ok {
				fmt.Fprintf(stderr, "gateway deadletters: no dead letter has the id %s in %s\n", c.IDs[0], where)
				return 1
			}
			letters = []async.Letter{l}
		}
		if c.JSON {
			printLettersJSON(stdout, letters, now)
			return 0
		}
		if c.Verb == "show" {
			printLetter(stdout, letters[0], now)
			return 0
		}
		printLetters(stdout, letters, where, now)
		return 0
	}
	if c.Verb == "purge" {
		return runPurge(ctx, r, c, where, now, stdout, stderr)
	}
	outs, err := r.Redrive(ctx, c.IDs, c.DryRun, now)
	if err != nil {
		return ExitCode(stderr, err)
	}
	return printRedrive(stdout, stderr, outs, where, c.DryRun)
}

// findLetter returns the letter whose request id or message id is id.
func findLetter(ls []async.Letter, id string) (async.Letter, bool) {
	for _, l := range ls {
		if l.RequestID == id || l.ID == id {
			return l, true
		}
	}
	return async.Letter{}, false
}

// canFinish says whether l's request can still finish, and why not.
func canFinish(l async.Letter, now time.Time) string {
	switch l.Verdict {
	case async.VerdictSend:
		return "yes, expires in " + l.Expiry.Sub(now).Round(time.Second).String()
	case async.VerdictFinished:
		return "no, finished (" + string(l.State) + ")"
	case async.VerdictExpired:
		return "no, expired " + now.Sub(l.Expiry).Round(time.Second).String() + " ago"
	case async.VerdictUnknown:
		return "no, no record"
	case async.VerdictCorrupt:
		return "no, record unreadable"
	case async.VerdictNewer:
		return "not by this build, newer format"
	}
	return "no, not a continuation"
}

func age(l async.Letter, now time.Time) string {
	if a := l.Age(now); a > 0 {
		return a.Round(time.Second).String()
	}
	return "-"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printLetters prints the listing as a table.
func printLetters(w io.Writer, ls []async.Letter, where string, now time.Time) {
	if len(ls) == 0 {
		fmt.Fprintf(w, "no dead letters in %s\n", where)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPROFILE\tAGE\tDELIVERIES\tATTEMPTS\tCAN FINISH\tREDRIVE\tLAST ERROR")
	for _, l := range ls {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", printable(l.Key()), orDash(printable(l.Profile)), age(l, now), l.Deliveries,
			len(l.Attempts), canFinish(l, now), l.Verdict, orDash(oneLine(l.LastError)))
	}
	tw.Flush()
	fmt.Fprintf(w, "%d dead letters in %s\n", len(ls), where)
}

// printLetter prints one letter in detail.
func printLetter(w io.Writer, l async.Letter, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("id", orDash(l.RequestID))
	row("message", printable(l.ID))
	row("profile", orDash(printable(l.Profile)))
	row("state", orDash(string(l.State)))
	if !l.Arrival.IsZero() {
		row("arrived", l.Arrival.Format(time.RFC3339)+" ("+age(l, now)+" ago)")
		row("expires", l.Expiry.Format(time.RFC3339))
	}
	if !l.SentAt.IsZero() {
		row("message sent", l.SentAt.Format(time.RFC3339))
	}
	row("deliveries", strconv.Itoa(l.Deliveries))
	row("attempts", strconv.Itoa(len(l.Attempts)))
	row("checkpoints", strconv.Itoa(l.Checkpoints))
	row("can finish", canFinish(l, now))
	row("redrive", string(l.Verdict))
	row("last error", orDash(oneLine(l.LastError)))
	row("body", bodyText(l.Body))
	for i, a := range l.Attempts {
		status := ""
		if a.Status != 0 {
			status = " " + strconv.Itoa(a.Status)
		}
		row(fmt.Sprintf("attempt %d", i+1), printable(fmt.Sprintf("%s %s%s after %d ms", a.Host, a.Outcome, status, a.DurationMs)))
	}
	tw.Flush()
}

// letterJSON is a letter as --json prints it.
type letterJSON struct {
	ID          string         `json:"id"`
	MessageID   string         `json:"messageId"`
	Profile     string         `json:"profile,omitempty"`
	State       string         `json:"state,omitempty"`
	AgeSeconds  float64        `json:"ageSeconds"`
	Arrival     *time.Time     `json:"arrival,omitempty"`
	Expiry      *time.Time     `json:"expiry,omitempty"`
	Deliveries  int            `json:"deliveries"`
	Attempts    []core.Attempt `json:"attempts"`
	Checkpoints int            `json:"checkpoints"`
	CanFinish   bool           `json:"canFinish"`
	Redrive     string         `json:"redrive"`
	LastError   string         `json:"lastError,omitempty"`
	Body        string         `json:"body"`
}

func printLettersJSON(w io.Writer, ls []async.Letter, now time.Time) {
	out := make([]letterJSON, 0, len(ls))
	for _, l := range ls {
		j := letterJSON{ID: l.Key(), MessageID: l.ID, Profile: l.Profile, State: string(l.State),
			AgeSeconds: l.Age(now).Seconds(), Deliveries: l.Deliveries, Attempts: l.Attempts,
			Checkpoints: l.Checkpoints, CanFinish: l.CanFinish(), Redrive: string(l.Verdict), LastError: l.LastError,
			Body: bodyText(l.Body)}
		if j.Attempts == nil {
			j.Attempts = []core.Attempt{}
		}
		if !l.Arrival.IsZero() {
			j.Arrival, j.Expiry = &l.Arrival, &l.Expiry
		}
		out = append(out, j)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(out)
}

// bodyText is a message body as text (printable), at most 1 KiB of it.
func bodyText(b []byte) string {
	if len(b) > 1<<10 {
		b = b[:1<<10]
	}
	return printable(string(b))
}

// printable is s as the tables print what a store or a record holds (a
// quarantined file's name, a profile, an error naming them): s itself when
// it is valid UTF-8 of printable characters and spaces, else s quoted with
// Go's escapes, so that no terminal escape, control character (a newline
// that would forge a row, a tab that would shift a column) or bidirectional
// override reaches the terminal as itself.
func printable(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return !strconv.IsPrint(r) }) {
		return s
	}
	return strconv.Quote(s)
}

// oneLine keeps s on one line of a table, printable.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return printable(s)
}

// copiesNote says how many copies of o's letter there were, when more than
// one.
func copiesNote(o async.Outcome) string {
	if o.Copies > 1 {
		return fmt.Sprintf(" (%d copies)", o.Copies)
	}
	return ""
}

// printFailed reports a letter that could not be sent or deleted, on w and
// stderr, and returns the exit code that makes: 1.
func printFailed(w, stderr io.Writer, o async.Outcome, copies string) int {
	fmt.Fprintf(w, "%s: failed%s: %s\n", printable(o.Key()), copies, printable(o.Err.Error()))
	fmt.Fprintf(stderr, "gateway deadletters: %s: %s\n", printable(o.Key()), printable(o.Err.Error()))
	return 1
}

// printRedrive prints what a redrive did and returns the exit code.
func printRedrive(w, stderr io.Writer, outs []async.Outcome, where string, dryRun bool) int {
	if len(outs) == 0 {
		fmt.Fprintf(w, "no dead letters in %s\n", where)
		return 0
	}
	would := ""
	if dryRun {
		would = "would be "
	}
	code := 0
	var sent, acked, left int
	for _, o := range outs {
		copies := copiesNote(o)
		switch {
		case o.Err != nil:
			code = printFailed(w, stderr, o, copies)
			left++
		case o.Verdict.Sends():
			fmt.Fprintf(w, "%s: %ssent back to the continuation queue%s; it can finish (expires %s)\n", o.Key(), would, copies, o.Expiry.Format(time.RFC3339))
			sent++
		case o.Verdict == async.VerdictFinished:
			fmt.Fprintf(w, "%s: %sacknowledged%s, not sent: already finished (%s)\n", o.Key(), would, copies, o.State)
			acked++
		case o.Verdict == async.VerdictExpired:
			fmt.Fprintf(w, "%s: not sent%s: expired at %s unfinished; left in the dead letters\n", o.Key(), copies, o.Expiry.Format(time.RFC3339))
			left++
		default:
			fmt.Fprintf(w, "%s: not sent%s: %s: %s; left in the dead letters\n", printable(o.Key()), copies, o.Verdict, oneLine(o.LastError))
			left++
		}
	}
	verb := "redrive"
	if dryRun {
		verb = "redrive --dry-run (nothing changed)"
	}
	fmt.Fprintf(w, "%s: %d sent, %d acknowledged, %d left in %s\n", verb, sent, acked, left, where)
	return code
}
