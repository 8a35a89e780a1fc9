#!/usr/bin/env python3
"""The S3 file storage against a real S3-compatible server: `moto_server` (moto in server mode,
signatures checked against access keys it issued through its IAM API), boto3 as the other client.

Parley (`--files-storage s3`, path style, 64 KiB parts) stores a small file with one PUT and a
larger one as a multipart upload; boto3 reads both back byte for byte. boto3 writes an object
and Parley serves it (whole, a range, HEAD, 304). A chunked upload past the size limit is 130
and leaves no multipart upload behind; DELETE removes the object. A second Parley with a wrong
secret answers uploads with Parse's 130 and downloads with 404, never a 500, and keeps serving.
"""
import http.client
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import files_support as fs  # noqa: E402

try:
    import boto3
    from botocore.exceptions import ClientError
except ImportError:
    sys.exit("files_s3: boto3 missing (pip install -r scripts/requirements-test.txt)")

BUCKET = "parley-files"
PART = 64 * 1024


def start_moto():
    port = fs.free_port()
    moto_bin = os.path.join(os.path.dirname(sys.executable), "moto_server")
    if not os.access(moto_bin, os.X_OK):
        sys.exit("files_s3: moto_server missing (pip install -r scripts/requirements-test.txt)")
    env = dict(os.environ, S3_UPLOAD_PART_MIN_SIZE=str(PART), INITIAL_NO_AUTH_ACTION_COUNT="3")
    log = tempfile.NamedTemporaryFile(prefix="moto-", suffix=".log", delete=False)
    process = subprocess.Popen([moto_bin, "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT, env=env)

    def up():
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            connection.request("GET", "/moto-api/")
            connection.getresponse().read()
            return True
        except OSError:
            return False
    fs.wait_until("moto_server", up)
    return process, port


def main():
    moto, moto_port = start_moto()
    endpoint = f"http://127.0.0.1:{moto_port}"
    # The first three requests are unauthenticated: an IAM user with a key and an allow-all policy.
    iam = boto3.client("iam", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="bootstrap", aws_secret_access_key="bootstrap")
    iam.create_user(UserName="parley")
    iam.put_user_policy(UserName="parley", PolicyName="all",
                        PolicyDocument='{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}')
    key = iam.create_access_key(UserName="parley")["AccessKey"]
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"])
    s3.create_bucket(Bucket=BUCKET)
    servers = []
    try:
        s3_flags = ["--files-storage", "s3", "--s3-endpoint", endpoint, "--s3-bucket", BUCKET, "--s3-region", "us-east-1",
                    "--s3-path-style", "true", "--s3-part-size", str(PART), "--max-upload-size", "1000000"]
        parley = fs.Parley(*s3_flags, env={"PARLEY_S3_ACCESS_KEY": key["AccessKeyId"], "PARLEY_S3_SECRET_KEY": key["SecretAccessKey"]})
        servers.append(parley)
        run(parley, s3)
        wrong = fs.Parley(*s3_flags, env={"PARLEY_S3_ACCESS_KEY": key["AccessKeyId"], "PARLEY_S3_SECRET_KEY": "not-the-secret"})
        servers.append(wrong)
        wrong_credentials(wrong, s3)
        print(f"{fs.CHECKS} checks passed")
    except SystemExit:
        for server in servers:
            server.dump()
        raise
    finally:
        for server in servers:
            server.stop()
        moto.terminate()
        moto.wait(timeout=10)


def run(parley, s3):
    # A small file: one PUT, read back by boto3.
    status, answer = parley.upload("hello.txt", b"hello from parley", content_type="text/plain")
    check_created(status, answer, "small upload")
    small = s3.get_object(Bucket=BUCKET, Key=answer["name"])
    fs.check("boto3 reads the small file", small["Body"].read(), b"hello from parley")
    fs.check("its content type", small["ContentType"], "text/plain")

    # Larger than a part: a multipart upload of 5 parts (4 whole, 1 short).
    large = os.urandom(4 * PART + 12345)
    status, answer = parley.upload("large.bin", large)
    check_created(status, answer, "multipart upload")
    large_name = answer["name"]
    fs.check("boto3 reads the multipart file", s3.get_object(Bucket=BUCKET, Key=large_name)["Body"].read(), large)
    fs.check("it was stored in 5 parts", s3.head_object(Bucket=BUCKET, Key=large_name)["ETag"].strip('"').endswith("-5"), True)
    status, _, body = parley.request("GET", fs.APP_ID and parley.file_path(answer["url"]))
    fs.check("Parley serves the multipart file", (status, body == large), (200, True))
    status, headers, body = parley.request("GET", parley.file_path(answer["url"]), headers={"Range": "bytes=70000-70009"})
    fs.check("a range of it", (status, headers.get("content-range"), body), (206, f"bytes 70000-70009/{len(large)}", large[70000:70010]))

    # A chunked upload exactly a multiple of the part size.
    exact = os.urandom(2 * PART)
    status, answer = chunked_upload(parley, "exact.bin", [exact[:1000], exact[1000:]])
    check_created(status, answer, "chunked upload of exactly 2 parts")
    fs.check("boto3 reads it", s3.get_object(Bucket=BUCKET, Key=answer["name"])["Body"].read(), exact)

    # boto3 writes, Parley serves.
    name = "0123456789abcdef0123456789abcdef_from boto.png"
    payload = os.urandom(3 * 1024 * 1024 + 7)
    s3.put_object(Bucket=BUCKET, Key=name, Body=payload, ContentType="image/png")
    path = f"/parse/files/{fs.APP_ID}/0123456789abcdef0123456789abcdef_from%20boto.png"
    status, headers, body = parley.request("GET", path)
    fs.check("Parley serves what boto3 wrote (ranged GETs of 1 MiB)", (status, headers.get("content-type"), body == payload), (200, "image/png", True))
    etag = headers.get("etag")
    fs.check("with S3's ETag", etag, s3.head_object(Bucket=BUCKET, Key=name)["ETag"])
    status, headers, body = parley.request("HEAD", path)
    fs.check("HEAD", (status, headers.get("content-length"), body), (200, str(len(payload)), b""))
    status, _, _ = parley.request("GET", path, headers={"If-None-Match": etag})
    fs.check("If-None-Match is 304", status, 304)
    status, headers, body = parley.request("GET", path, headers={"Range": "bytes=-5"})
    fs.check("a suffix range", (status, body), (206, payload[-5:]))

    # Past the size limit in a chunked body: 130, and the multipart upload is aborted.
    status, answer = chunked_upload(parley, "huge.bin", [os.urandom(PART)] * 16)
    fs.check("a chunked upload past --max-upload-size", (status, answer.get("code")), (400, 130))
    fs.check("no multipart upload is left behind", s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []), [])
    status, _, _ = parley.request("POST", "/parse/files/big.bin", body=b"x" * 1000001, master=True, headers={"Content-Type": "application/octet-stream"})
    fs.check("a Content-Length past the limit is 413", status, 413)

    # Delete through Parley: gone from the bucket.
    status, _, _ = parley.request("DELETE", f"/parse/files/{large_name}", master=True)
    fs.check("DELETE", status, 200)
    try:
        s3.head_object(Bucket=BUCKET, Key=large_name)
        gone = False
    except ClientError as error:
        gone = error.response["Error"]["Code"] in ("404", "NoSuchKey")
    fs.check("the object is gone", gone, True)
    status, _, body = parley.request("GET", f"/parse/files/{fs.APP_ID}/{large_name}")
    fs.check("its URL is 404", (status, body), (404, b"File not found."))
    status, _, body = parley.request("DELETE", f"/parse/files/{large_name}", master=True)
    fs.check("deleting it again is 153", (status, b'"code":153' in body), (400, True))
    status, _, _ = parley.request("DELETE", f"/parse/files/{name.replace(' ', '%20')}")
    fs.check("DELETE without the master key is refused", status in (401, 403), True)


def wrong_credentials(parley, s3):
    status, answer = parley.upload("hello.txt", b"refused")
    fs.check("an upload with a wrong S3 secret is Parse's 130", (status, answer.get("code")), (400, 130))
    status, answer = parley.upload("large.bin", os.urandom(3 * PART))
    fs.check("a multipart one too", (status, answer.get("code")), (400, 130))
    keys = [item["Key"] for item in s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])]
    status, _, body = parley.request("GET", f"/parse/files/{fs.APP_ID}/{keys[0].replace(' ', '%20')}")
    fs.check("a download is Parse's 404, not a 500", (status, body), (404, b"File not found."))
    status, _, _ = parley.request("GET", "/health")
    fs.check("the server keeps serving", status, 200)
    parley.log.flush()
    fs.check("the log names S3's refusal", "SignatureDoesNotMatch" in open(parley.log_path).read(), True)


def check_created(status, answer, label):
    fs.check(f"{label}: 201", status, 201)
    fs.check(f"{label}: url and name", sorted(answer), ["name", "url"])


def chunked_upload(parley, name, chunks):
    connection = http.client.HTTPConnection("127.0.0.1", parley.port, timeout=60)
    try:
        connection.request("POST", f"/parse/files/{name}", body=iter(chunks), encode_chunked=True,
                           headers={"X-Parse-Application-Id": fs.APP_ID, "X-Parse-Master-Key": fs.MASTER_KEY,
                                    "Content-Type": "application/octet-stream", "Transfer-Encoding": "chunked"})
        response = connection.getresponse()
        import json
        return response.status, json.loads(response.read() or b"null")
    except (BrokenPipeError, ConnectionResetError):
        response = connection.getresponse()
        import json
        return response.status, json.loads(response.read() or b"null")
    finally:
        connection.close()


if __name__ == "__main__":
    main()
