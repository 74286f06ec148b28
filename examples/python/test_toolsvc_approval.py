"""Tests of toolsvc_approval.py against a real toolsvc, standard library only.

cmd/toolsvc/approval_tools_e2e_test.go (TestPythonApprovalExample) starts
the service with the policy below and runs this file. By hand:

    printf 'approval:\\n  exec: always\\n  write_file: [{path: "deploy/*"}]\\n' > policy.yaml
    TOOLSVC_API_KEYS="agent=$AGENT_KEY,ops=$OPS_KEY" TOOLSVC_APPROVER_KEYS=ops \\
        TOOLSVC_POLICY_FILE=policy.yaml ./toolsvc &
    TOOLS_URL=http://127.0.0.1:8080 AGENT_KEY=$AGENT_KEY APPROVER_KEY=$OPS_KEY \\
        python3 -m unittest -v test_toolsvc_approval.py

APPROVER_NAME is the approver key's name (default ops). Without TOOLS_URL
the tests are skipped (unless REQUIRE_TOOLSVC is set).
"""

import os
import sys
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import toolsvc_approval as ta  # noqa: E402

URL = os.environ.get("TOOLS_URL")
if not URL and os.environ.get("REQUIRE_TOOLSVC"):
    raise SystemExit("REQUIRE_TOOLSVC is set and TOOLS_URL is not")


@unittest.skipUnless(URL, "TOOLS_URL names no running toolsvc")
class HoldAgainstToolsvc(unittest.TestCase):
    def setUp(self):
        self.client = ta.Client(URL, key=os.environ["AGENT_KEY"], session="approval-example")
        self.desk = ta.Approvals(URL, key=os.environ["APPROVER_KEY"])
        self.calls = ta.HeldCalls(self.client, self.desk)
        self.tag = uuid.uuid4().hex[:8]

    def read(self, path):
        r = self.client.invoke("read_file", {"path": path})
        return r["result"] if r["status"] == "success" else None

    def test_unheld_call_runs_once(self):
        path = f"notes/{self.tag}.txt"
        args = '{"path": "%s", "content": "one\\n", "mode": "append"}' % path
        o = self.calls.first("call-1", "write_file", args)
        self.assertFalse(o.held)
        self.assertEqual(o.result["status"], "success")
        # Asked again for the same call: the same answer, not a second write.
        self.assertIs(self.calls.first("call-1", "write_file", args), o)
        self.assertEqual(self.read(path).count("one"), 1)

    def test_held_call_approved_runs_once(self):
        args = '{"command": "echo ok-%s >> ran-%s.txt; cat ran-%s.txt"}' % (self.tag, self.tag, self.tag)
        o = self.calls.first("call-2", "exec", args)
        self.assertTrue(o.held, o.result)
        self.assertTrue(o.approval_id)
        self.assertIn("run the command", o.summary)
        self.assertIsNone(self.read(f"ran-{self.tag}.txt"), "a held call ran")
        # The person's desk lists it with the agent's key name.
        self.assertIn(o.approval_id, [a["approval_id"] for a in self.desk.pending()])

        result = self.calls.approve("call-2", reason="looks fine")
        self.assertEqual(result["status"], "success", result)
        self.assertEqual(result["result"].strip(), "ok-" + self.tag)
        self.assertEqual(self.desk.get(o.approval_id)["decided_by"], os.environ.get("APPROVER_NAME", "ops"))
        # The call's outcome is now the result: asking again sends nothing.
        self.assertEqual(self.calls.first("call-2", "exec", args).result, result)
        # The approval cannot run the call a second time.
        again = self.client.invoke("exec", args, approval_id=o.approval_id)
        self.assertEqual(again["error"]["code"], "approval_invalid")
        self.assertEqual(self.read(f"ran-{self.tag}.txt").count("ok-" + self.tag), 1)

    def test_rejected_call_never_runs(self):
        args = {"path": f"deploy/{self.tag}.yaml", "content": "replicas: 3\n"}
        o = self.calls.first("call-3", "write_file", args)
        self.assertTrue(o.held, o.result)
        decided = self.calls.reject("call-3", reason="no deploys on Fridays")
        self.assertEqual(decided["status"], "rejected")
        # The same call sent by the agent now gets the person's reason.
        r = self.client.invoke("write_file", args)
        self.assertEqual(r["error"]["code"], "approval_rejected")
        self.assertIn("no deploys on Fridays", r["result"])
        self.assertIsNone(self.read(f"deploy/{self.tag}.yaml"))

    def test_other_arguments_do_not_ride_an_approval(self):
        o = self.calls.first("call-4", "exec", {"command": "echo approved-" + self.tag})
        self.assertTrue(o.held)
        self.desk.decide(o.approval_id, "approve")
        r = self.client.invoke("exec", {"command": "echo evil-" + self.tag}, approval_id=o.approval_id)
        self.assertEqual(r["error"]["code"], "approval_invalid")
        self.assertIn("exact call approved", r["result"])

    def test_without_an_approver_key_the_call_still_waits(self):
        calls = ta.HeldCalls(self.client)
        o = calls.first("call-5", "exec", {"command": "echo wait-" + self.tag})
        self.assertTrue(o.held)
        self.assertEqual(calls.approve("call-5")["status"], ta.APPROVAL_REQUIRED)
        self.assertIsNone(calls.reject("call-5"))
        # Decided in toolsvc by the person, the next resend runs.
        self.desk.decide(o.approval_id, "approve")
        self.assertEqual(calls.approve("call-5")["status"], "success")

    def test_the_agent_key_cannot_decide(self):
        o = self.calls.first("call-6", "exec", {"command": "echo self-" + self.tag})
        with self.assertRaises(ta.ToolsvcError) as cm:
            ta.Approvals(URL, key=os.environ["AGENT_KEY"]).decide(o.approval_id, "approve")
        self.assertEqual(cm.exception.status, 403)
        self.assertEqual(cm.exception.code, "forbidden")


if __name__ == "__main__":
    unittest.main()
