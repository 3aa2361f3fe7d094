package terraform

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// sdkPermissions maps each AWS SDK call infra/aws makes (file, then
// receiver.Method) to the statements (by sid) of the Lambda role that must
// grant it, each with the IAM action it needs; an empty list says why none is
// needed on Lambda.
var sdkPermissions = map[string][]grant{
	// S3 (Amazon S3 API Reference, each operation's Permissions section):
	// the multipart operations but AbortMultipartUpload are s3:PutObject.
	"store.go s.client.GetObject":               {{"ResultObjects", "s3:GetObject"}},
	"store.go s.client.PutObject":               {{"ResultObjects", "s3:PutObject"}},
	"store.go s.client.CreateMultipartUpload":   {{"ResultObjects", "s3:PutObject"}},
	"store.go s.client.UploadPart":              {{"ResultObjects", "s3:PutObject"}},
	"store.go s.client.CompleteMultipartUpload": {{"ResultObjects", "s3:PutObject"}},
	"store.go s.client.AbortMultipartUpload":    {{"ResultObjects", "s3:AbortMultipartUpload"}},
	"store.go s.client.HeadBucket":              {{"ResultBucket", "s3:ListBucket"}},
	"store.go s.client.CreateBucket":            nil, // only for a missing bucket: the module creates it
	// The settings document (SettingsSource=s3://, warm_settings): read
	// only, that one object.
	"settingsobject.go o.client.GetObject": {{"SettingsObject", "s3:GetObject"}},
	// A presigned GET is made with the function's credentials.
	"sign.go s.presign.PresignGetObject": {{"ResultObjects", "s3:GetObject"}},
	// SQS: the continuation queue.
	"queue.go q.client.SendMessage":             {{"Continuations", "sqs:SendMessage"}},
	"queue.go q.client.ReceiveMessage":          {{"Continuations", "sqs:ReceiveMessage"}},
	"queue.go q.client.DeleteMessage":           {{"Continuations", "sqs:DeleteMessage"}},
	"queue.go q.client.ChangeMessageVisibility": {{"Continuations", "sqs:ChangeMessageVisibility"}},
	// createQueue: a missing queue, created only off Lambda (the module
	// creates the continuation queue and the role grants no
	// sqs:CreateQueue).
	"queue.go client.CreateQueue": nil,
	"queue.go client.GetQueueUrl": nil,
	// SNS: the notification topics (Amazon SNS API permissions: Publish is
	// sns:Publish). CreateTopic only off Lambda: on Lambda the module
	// creates every topic and writes its ARN, the Notifier has NoCreate and
	// the role grants no sns:CreateTopic.
	"notifier.go n.client.Publish":     {{"Notifications", "sns:Publish"}},
	"notifier.go n.client.CreateTopic": nil,
	// The dead-letter queue: only `gateway deadletters`, an operator's
	// command run with the operator's credentials, never by the function
	// (docs/operations.md lists the permissions it needs).
	"deadletters.go client.GetQueueAttributes":        nil,
	"deadletters.go client.GetQueueUrl":               nil,
	"deadletters.go d.client.ReceiveMessage":          nil,
	"deadletters.go d.client.DeleteMessage":           nil,
	"deadletters.go d.client.ChangeMessageVisibility": nil,
}

// platformPermissions are what Lambda itself does with the role: the SQS
// event source mapping polls with it ("Lambda needs the following
// permissions to manage messages in your Amazon SQS queue": ReceiveMessage,
// DeleteMessage, GetQueueAttributes; Lambda Developer Guide, "Execution role
// permissions" for SQS), and the function logs with it.
var platformPermissions = []grant{
	{"Continuations", "sqs:ReceiveMessage"},
	{"Continuations", "sqs:DeleteMessage"},
	{"Continuations", "sqs:GetQueueAttributes"},
	{"Logs", "logs:CreateLogStream"},
	{"Logs", "logs:PutLogEvents"},
}

type grant struct{ sid, action string }

var sdkCall = regexp.MustCompile(`\b((?:[a-z]\.)?(?:client|presign))\.([A-Z][A-Za-z]+)\(`)

// TestLambdaRolePermissions checks that the AWS module's role grants every
// action the gateway's AWS calls need (read from infra/aws's source, so a new
// call must be mapped here) and those Lambda needs for the queue and the logs,
// each in the statement on the right resource.
func TestLambdaRolePermissions(t *testing.T) {
	calls, err := awsCalls("../infra/aws")
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) < 10 {
		t.Fatalf("found %d AWS SDK calls in infra/aws: the pattern no longer matches the code", len(calls))
	}
	m, err := loadModule("aws")
	if err != nil {
		t.Fatal(err)
	}
	// With warm_settings, so that the settings document's statement is there.
	granted, err := policyActions(m, awsSpec.sample.with(vars{"warm_settings": warmSample}), "aws_iam_policy_document.gateway")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range checkGrants(calls, granted) {
		t.Error(p)
	}
	for _, p := range unneededGrants(calls, granted) {
		t.Error(p)
	}
}

// grantedWithoutCall are the actions the role grants that no SDK call of
// infra/aws makes, each for a reason of its own.
var grantedWithoutCall = map[grant]string{
	{"ResultBucket", "s3:ListBucket"}: "GetObject of a missing key answers 404, not 403 (Amazon S3 API Reference, GetObject, Permissions)",
	// warm_settings_source = appconfig: the AppConfig Agent Lambda extension
	// reads the configuration with the function's role; the gateway only
	// asks the extension's local endpoint (internal/settings/appconfig.go).
	{"AppConfig", "appconfig:StartConfigurationSession"}: "the AppConfig Agent Lambda extension's call (AppConfig Data API), made with the function's role",
	{"AppConfig", "appconfig:GetLatestConfiguration"}:    "the AppConfig Agent Lambda extension's call (AppConfig Data API), made with the function's role",
}

// unneededGrants reports the actions the role grants that neither a call of
// infra/aws, nor the platform, nor grantedWithoutCall needs: least
// privilege.
func unneededGrants(calls []string, granted map[string][]string) []string {
	need := map[grant]bool{}
	for _, g := range platformPermissions {
		need[g] = true
	}
	for _, c := range calls {
		for _, g := range sdkPermissions[c] {
			need[g] = true
		}
	}
	var problems []string
	for _, sid := range sortedKeys(granted) {
		for _, action := range granted[sid] {
			g := grant{sid, action}
			if _, ok := grantedWithoutCall[g]; !need[g] && !ok {
				problems = append(problems, fmt.Sprintf("the role's statement %s grants %s, which no call of infra/aws makes: remove it (or say why in grantedWithoutCall)", sid, action))
			}
		}
	}
	return problems
}

// checkGrants reports the calls not mapped in sdkPermissions and the grants
// they (and the platform) need that the policy lacks.
func checkGrants(calls []string, granted map[string][]string) []string {
	var problems []string
	need := append([]grant(nil), platformPermissions...)
	for _, c := range calls {
		gs, ok := sdkPermissions[c]
		if !ok {
			problems = append(problems, fmt.Sprintf("infra/aws/%s: an AWS call this test does not know: add it to sdkPermissions with the IAM action it needs", c))
			continue
		}
		need = append(need, gs...)
	}
	for _, g := range need {
		if !contains(granted[g.sid], g.action) {
			problems = append(problems, fmt.Sprintf("the role's statement %s does not grant %s (it grants %q)", g.sid, g.action, granted[g.sid]))
		}
	}
	return problems
}

// awsCalls lists "file receiver.Method" for every SDK call in the
// non-test Go files of dir.
func awsCalls(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, m := range sdkCall.FindAllStringSubmatch(string(src), -1) {
			seen[filepath.Base(f)+" "+m[1]+"."+m[2]] = true
		}
	}
	out := sortedKeys(seen)
	sort.Strings(out)
	return out, nil
}

// policyActions evaluates an aws_iam_policy_document's statements (dynamic
// ones included): sid → actions.
func policyActions(m *module, given vars, key string) (map[string][]string, error) {
	b, ok := m.data[key]
	if !ok {
		return nil, fmt.Errorf("%s: no data %s", m.name, key)
	}
	e, err := m.eval(given)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	add := func(body *hclsyntax.Body) error {
		sidA, ok1 := body.Attributes["sid"]
		actA, ok2 := body.Attributes["actions"]
		if !ok1 || !ok2 {
			return fmt.Errorf("%s: a statement without sid or actions", key)
		}
		sid, err := e.value(sidA.Expr)
		if err != nil {
			return err
		}
		acts, err := e.value(actA.Expr)
		if err != nil {
			return err
		}
		s, _ := text(sid)
		for it := acts.ElementIterator(); it.Next(); {
			_, v := it.Element()
			a, _ := text(v)
			out[s] = append(out[s], a)
		}
		return nil
	}
	for _, sb := range b.Body.Blocks {
		switch {
		case sb.Type == "statement":
			if err := add(sb.Body); err != nil {
				return nil, err
			}
		case sb.Type == "dynamic" && len(sb.Labels) == 1 && sb.Labels[0] == "statement":
			for _, cb := range sb.Body.Blocks {
				if cb.Type == "content" {
					if err := add(cb.Body); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	return out, nil
}

// TestLambdaRolePermissionsFail checks the checker: a call it does not know
// and a grant the policy lacks are both reported.
func TestLambdaRolePermissionsFail(t *testing.T) {
	granted := map[string][]string{"ResultObjects": {"s3:GetObject", "s3:PutObject"}}
	problems := strings.Join(checkGrants([]string{"store.go s.client.AbortMultipartUpload", "store.go s.client.DeleteBucket"}, granted), "\n")
	for _, want := range []string{
		"infra/aws/store.go s.client.DeleteBucket: an AWS call this test does not know",
		"statement ResultObjects does not grant s3:AbortMultipartUpload",
		"statement Continuations does not grant sqs:GetQueueAttributes",
	} {
		if !strings.Contains(problems, want) {
			t.Errorf("want a problem containing %q, got:\n%s", want, problems)
		}
	}
}

// TestNotificationQueuesOwned checks that each module creates the
// notification queue (Azure) or SNS FIFO topic (AWS) of every profile topic
// (and of notification_topics), so terraform destroy removes them, and that
// the AWS role may only publish to those topics, whose ARNs it is given in
// NotificationTopicArns: no sns:CreateTopic or sqs:CreateQueue, the
// Notifications statement on the module's own topics (docs/terraform.md#inputs-at-a-glance).
func TestNotificationQueuesOwned(t *testing.T) {
	for _, c := range []struct {
		sp       spec
		resource string
		a, extra string
	}{{awsSpec, "aws_sns_topic.notifications", "gw-a-events.fifo", "gw-extra.fifo"}, {azureSpec, "azurerm_storage_queue.notifications", "gw-a-events", "gw-extra"}} {
		profiles := cty.StringVal(`[{"userId":"a","async-config":{"enabled":true,"topic":"` + c.a + `"}},{"userId":"b","async-config":{"topic":"` + c.a + `"}},{"userId":"c"}]`)
		t.Run(c.sp.dir, func(t *testing.T) {
			m, err := loadModule(c.sp.dir)
			if err != nil {
				t.Fatal(err)
			}
			given := c.sp.sample.with(vars{"user_profiles": profiles, "notification_topics": cty.ListVal([]cty.Value{cty.StringVal(c.extra)})})
			e, err := m.eval(given)
			if err != nil {
				t.Fatal(err)
			}
			fe, err := e.attr(c.resource, "for_each")
			if err != nil {
				t.Fatalf("%v: want the module to create the profiles' notification queues", err)
			}
			var got []string
			for it := fe.ElementIterator(); it.Next(); {
				_, v := it.Element()
				s, _ := text(v)
				got = append(got, s)
			}
			sort.Strings(got)
			if want := []string{c.a, c.extra}; !reflect.DeepEqual(got, want) {
				t.Errorf("%s for_each = %q, want %q", c.resource, got, want)
			}
			name, err := m.attrExpr(c.resource, "name")
			if err != nil {
				t.Fatal(err)
			}
			if tr := name.Variables(); len(tr) != 1 || tr[0].RootName() != "each" {
				t.Errorf("%s name is not each.value", c.resource)
			}
			if c.sp.dir != "aws" {
				return
			}
			if fifo, err := e.attr(c.resource, "fifo_topic"); err != nil || !fifo.True() {
				t.Errorf("%s fifo_topic = %#v, %v; want true: only a FIFO topic keeps a request's notifications in order", c.resource, fifo, err)
			}
			written, err := writtenSettings(m, c.sp, vars{"user_profiles": profiles, "notification_topics": cty.ListVal([]cty.Value{cty.StringVal(c.extra)})})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := written["NotificationTopicArns"]; !ok {
				t.Error("the module does not write NotificationTopicArns: the function would have no topic's ARN")
			}
			granted, err := policyActions(m, given, "aws_iam_policy_document.gateway")
			if err != nil {
				t.Fatal(err)
			}
			for sid, acts := range granted {
				if contains(acts, "sqs:CreateQueue") || contains(acts, "sns:CreateTopic") {
					t.Errorf("statement %s grants %q: the module creates every queue and topic", sid, acts)
				}
			}
			if acts := granted["Notifications"]; len(acts) != 1 || acts[0] != "sns:Publish" {
				t.Errorf("Notifications grants %q, want sns:Publish only", acts)
			}
			res, err := statementResources(m, "aws_iam_policy_document.gateway", "Notifications")
			if err != nil {
				t.Fatal(err)
			}
			refs := map[string]bool{}
			for _, tr := range res.Variables() {
				if tr.RootName() == "aws_sns_topic" {
					if a, ok := tr[1].(hcl.TraverseAttr); ok {
						refs[a.Name] = true
					}
				}
			}
			if len(refs) != 1 || !refs["notifications"] {
				t.Errorf("Notifications resources refer to %v; want the module's aws_sns_topic.notifications only", refs)
			}
		})
	}
}

// statementResources returns the resources expression of the statement
// (or dynamic statement's content) with sid in the policy document key.
func statementResources(m *module, key, sid string) (hcl.Expression, error) {
	b, ok := m.data[key]
	if !ok {
		return nil, fmt.Errorf("%s: no data %s", m.name, key)
	}
	var bodies []*hclsyntax.Body
	for _, sb := range b.Body.Blocks {
		switch {
		case sb.Type == "statement":
			bodies = append(bodies, sb.Body)
		case sb.Type == "dynamic" && len(sb.Labels) == 1 && sb.Labels[0] == "statement":
			for _, cb := range sb.Body.Blocks {
				if cb.Type == "content" {
					bodies = append(bodies, cb.Body)
				}
			}
		}
	}
	for _, body := range bodies {
		a, ok := body.Attributes["sid"]
		if !ok {
			continue
		}
		if v, diags := a.Expr.Value(nil); !diags.HasErrors() && v.Type() == cty.String && v.AsString() == sid {
			r, ok := body.Attributes["resources"]
			if !ok {
				return nil, fmt.Errorf("%s: statement %s has no resources", key, sid)
			}
			return r.Expr, nil
		}
	}
	return nil, fmt.Errorf("%s: no statement %s", key, sid)
}
