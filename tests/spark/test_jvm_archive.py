"""The driver's class-data-sharing archive is used when it exists, and only then."""

from segment_balancer.spark import jvm_archive


def test_archive_option_only_when_the_archive_exists(tmp_path, monkeypatch):
    path = tmp_path / "driver.jsa"
    monkeypatch.setenv(jvm_archive.ARCHIVE_ENV, str(path))
    assert jvm_archive.local_driver_java_options() == jvm_archive.BASE_DRIVER_JAVA_OPTIONS
    path.write_bytes(b"")  # an empty file (an interrupted copy) is not an archive
    assert "SharedArchiveFile" not in jvm_archive.local_driver_java_options()
    path.write_bytes(b"x")
    assert jvm_archive.local_driver_java_options() == (
        f"{jvm_archive.BASE_DRIVER_JAVA_OPTIONS} -XX:SharedArchiveFile={path}"
    )


def test_default_archive_lives_in_the_interpreter_environment(monkeypatch):
    import sys

    monkeypatch.delenv(jvm_archive.ARCHIVE_ENV, raising=False)
    assert jvm_archive.archive_path().is_relative_to(sys.prefix)
