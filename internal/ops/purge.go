package ops

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"fngateway/core/async"
)

// purgeFlags adds the flags of `gateway deadletters purge` to fs.
func purgeFlags(fs *flag.FlagSet, c *dlCommand) {
	fs.BoolVar(&c.Force, "force", false, "purge letters younger than --min-age, and end requests that could still finish")
	fs.DurationVar(&c.MinAge, "min-age", async.DefaultPurgeMinAge, "refuse letters younger than this")
}

// runPurge is `gateway deadletters purge …`: it discards the dead letters
// c names (every one without ids) and prints what it did; it returns the
// exit code: 1 when a letter could not be deleted, or was refused.
func runPurge(ctx context.Context, r *async.Redriver, c dlCommand, where string, now time.Time, stdout, stderr io.Writer) int {
	if c.MinAge < 0 {
		fmt.Fprintf(stderr, "gateway deadletters: --min-age %s: want a duration of zero or more\n", c.MinAge)
		return 2
	}
	outs, err := r.Purge(ctx, c.IDs, c.DryRun, c.Force, c.MinAge, now)
	if err != nil {
		return ExitCode(stderr, err)
	}
	if len(outs) == 0 {
		fmt.Fprintf(stdout, "no dead letters in %s\n", where)
		return 0
	}
	would := ""
	if c.DryRun {
		would = "would be "
	}
	code := 0
	var purged, kept int
	for _, o := range outs {
		copies := copiesNote(o)
		switch {
		case o.Err != nil:
			code = printFailed(stdout, stderr, o, copies)
			kept++
		case o.Refused != "":
			fmt.Fprintf(stdout, "%s: kept%s: %s\n", printable(o.Key()), copies, printable(fmt.Sprint(o.Refused)))
			kept++
		case o.Verdict.Sends():
			fmt.Fprintf(stdout, "%s: %spurged%s; its request %sended Failed\n", printable(o.Key()), would, copies, would)
			purged++
		default:
			fmt.Fprintf(stdout, "%s: %spurged%s (%s)\n", printable(o.Key()), would, copies, o.Verdict)
			purged++
		}
	}
	verb, did := "purge", "purged"
	if c.DryRun {
		verb, did = "purge --dry-run (nothing changed)", "would be purged"
	}
	fmt.Fprintf(stdout, "%s: %d %s, %d kept in %s\n", verb, purged, did, kept, where)
	if kept > 0 && code == 0 && !c.DryRun {
		code = 1
	}
	return code
}
