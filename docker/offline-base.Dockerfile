# The offline base image's second layer (docker/build_offline_base.sh builds it; never pulled from a registry).
# FROM is the host-python rootfs made by executor_svc/image/build_offline.sh; this layer adds what the application
# image needs on top of "a python3 with its stdlib": the system libraries that manylinux wheels (torch, tokenizers, numpy)
# expect from the system, bubblewrap (the executor's sandbox in a pod), the host's CA bundle (pip reaches PyPI through
# the same TLS path as the host), and pip.
ARG ROOTFS_IMAGE=azr-python-rootfs:3.11
FROM ${ROOTFS_IMAGE}
USER 0:0
COPY lib/ /usr/lib/x86_64-linux-gnu/
COPY bin/ /usr/bin/
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY wheels/ /opt/azr-bootstrap/
ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/usr/local/bin:/usr/bin:/bin \
    LANG=C.UTF-8
# pip runs straight from its wheel (a wheel is a zip on sys.path) to install itself; Debian's interpreter marks its
# stdlib EXTERNALLY-MANAGED, hence the flag: this image has no Debian package manager to conflict with.
RUN python3 -c "import glob, runpy, sys; wheel = glob.glob('/opt/azr-bootstrap/pip-*.whl')[0]; sys.path.insert(0, wheel); sys.argv = ['pip', 'install', '--no-index', '--break-system-packages', '--no-compile', wheel]; runpy.run_module('pip', run_name='__main__')" \
 && python3 -m pip --version
CMD ["python3"]
