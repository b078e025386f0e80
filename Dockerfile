# The manager image: `lws controller` with the pinned dependencies.
FROM python:3.11-slim
WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY src ./src
RUN pip install --no-cache-dir -c constraints.txt . && rm -rf /src
USER 65532:65532
ENTRYPOINT ["lws"]
CMD ["controller"]
