package ops

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"fngateway/infra/aws"
)

// checkSQSQueueURL checks a --dlq value as the binary's AWS build does.
func checkSQSQueueURL(s string) error {
	_, err := aws.ParseQueueURL(s)
	return err
}

// TestParseDeadLetters: the command lines the command takes, and a clear
// error naming what is wrong in the others.
func TestParseDeadLetters(t *testing.T) {
	const id = "0123456789abcdef0123456789abcdef"
	const uuid = "a7098237-D1ED-4cd9-846e-47754ad74026"
	tests := []struct {
		args    []string
		want    dlCommand
		wantErr string
	}{
		{[]string{"list"}, dlCommand{Verb: "list"}, ""},
		{[]string{"list", "--json"}, dlCommand{Verb: "list", JSON: true}, ""},
		{[]string{"show", id}, dlCommand{Verb: "show", IDs: []string{id}}, ""},
		{[]string{"show", uuid}, dlCommand{Verb: "show", IDs: []string{uuid}}, ""},
		{[]string{"show", id + ".msg"}, dlCommand{Verb: "show", IDs: []string{id + ".msg"}}, ""},
		{[]string{"redrive"}, dlCommand{Verb: "redrive", IDs: []string{}}, ""},
		{[]string{"redrive", "--dry-run", id, uuid}, dlCommand{Verb: "redrive", DryRun: true, IDs: []string{id, uuid}}, ""},
		{[]string{"redrive", "--dlq", "https://sqs.eu-west-1.amazonaws.com/123456789012/gw-continuations-dlq"},
			dlCommand{Verb: "redrive", IDs: []string{}, DLQ: "https://sqs.eu-west-1.amazonaws.com/123456789012/gw-continuations-dlq"}, ""},
		{[]string{"--help"}, dlCommand{Verb: "help"}, ""},
		{nil, dlCommand{}, "want a subcommand"},
		{[]string{"purge"}, dlCommand{Verb: "purge", IDs: []string{}, MinAge: time.Hour}, ""},
		{[]string{"purge", "--dry-run", "--force", "--min-age", "10m", id}, dlCommand{Verb: "purge", DryRun: true, Force: true, MinAge: 10 * time.Minute, IDs: []string{id}}, ""},
		{[]string{"purge", "--min-age", "soon"}, dlCommand{}, "-min-age"},
		{[]string{"purge", "--json"}, dlCommand{}, "-json"},
		{[]string{"drop"}, dlCommand{}, `unknown subcommand "drop"`},
		{[]string{"list", id}, dlCommand{}, "list takes no id"},
		{[]string{"show"}, dlCommand{}, "want exactly one id, got 0"},
		{[]string{"show", id, id}, dlCommand{}, "want exactly one id, got 2"},
		{[]string{"show", "xyz"}, dlCommand{}, `id "xyz"`},
		{[]string{"show", strings.ToUpper(id)}, dlCommand{}, `id "` + strings.ToUpper(id) + `"`},
		{[]string{"redrive", id, "--dry-run"}, dlCommand{}, `"--dry-run": flags go before the ids`},
		{[]string{"redrive", "--force"}, dlCommand{}, "-force"},
		{[]string{"list", "--dry-run"}, dlCommand{}, "-dry-run"},
		{[]string{"redrive", "--dlq", "sqs://nope"}, dlCommand{}, `--dlq "sqs://nope"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got, err := parseDeadLetters(tt.args, checkSQSQueueURL)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseDeadLetters(%q) = %v; want an error containing %q", tt.args, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseDeadLetters(%q): %v", tt.args, err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("parseDeadLetters(%q) = %+v; want %+v", tt.args, got, tt.want)
			}
		})
	}
}

// FuzzParseDeadLetters: any command line parses or fails with an error,
// never a panic; what parses names a known verb and only ids that can name
// a dead letter, and parses again to the same command.
func FuzzParseDeadLetters(f *testing.F) {
	f.Add("redrive\x00--dry-run\x000123456789abcdef0123456789abcdef")
	f.Add("show\x00a7098237-d1ed-4cd9-846e-47754ad74026")
	f.Add("list\x00--json")
	f.Add("redrive\x00--dlq\x00https://sqs.us-east-1.amazonaws.com/1/q")
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Split(line, "\x00")
		c, err := parseDeadLetters(args, checkSQSQueueURL)
		if err != nil || c.Verb == "help" {
			return
		}
		if c.Verb != "list" && c.Verb != "show" && c.Verb != "redrive" && c.Verb != "purge" {
			t.Fatalf("verb %q parsed", c.Verb)
		}
		for _, id := range c.IDs {
			if !validLetterID(id) {
				t.Fatalf("id %q parsed", id)
			}
		}
		again := []string{c.Verb}
		if c.JSON {
			again = append(again, "--json")
		}
		if c.DryRun {
			again = append(again, "--dry-run")
		}
		if c.DLQ != "" {
			again = append(again, "--dlq", c.DLQ)
		}
		if c.Verb == "purge" {
			again = append(again, "--min-age", c.MinAge.String())
			if c.Force {
				again = append(again, "--force")
			}
		}
		again = append(again, c.IDs...)
		c2, err := parseDeadLetters(again, checkSQSQueueURL)
		if err != nil || fmt.Sprint(c2) != fmt.Sprint(c) {
			t.Fatalf("reparse of %q = %+v, %v; want %+v", again, c2, err, c)
		}
	})
}
