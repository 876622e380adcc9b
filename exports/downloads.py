"""Files kept in a storage (releases, results), answered as downloads after the caller's access was checked."""

from django.core.files.storage import FileSystemStorage, Storage
from django.http import FileResponse, HttpResponse, HttpResponseRedirect
from django.utils.http import content_disposition_header


def download_response(storage: Storage, name: str, *, filename: str, content_type: str) -> HttpResponse:
    """The stored file `name` as an attachment named `filename`.

    From a local folder it is streamed in blocks. From an object store the answer is a redirect to
    a signed URL of the object that expires in minutes (AWS_QUERYSTRING_EXPIRE) and names the
    download: the file never passes through (or fills) a web worker. The caller checks that it
    exists and that the user may have it.
    """
    if isinstance(storage, FileSystemStorage):
        return FileResponse(storage.open(name, "rb"), as_attachment=True, filename=filename, content_type=content_type)
    disposition = content_disposition_header(as_attachment=True, filename=filename)
    parameters = {"ResponseContentDisposition": disposition, "ResponseContentType": content_type}
    signed = storage.url(name, parameters=parameters)
    return HttpResponseRedirect(signed, headers={"Cache-Control": "no-store"})
